package tdjsonsim

import "stashd/tg"

// send sends a document already on Telegram (inputFileRemote), the only
// message stashd sends, and returns the temporary message. Of options,
// disable_notification is passed on (the world records it per send);
// reply_to and reply_markup change nothing the simulator models and are
// ignored.
func (s *session) send(r *request) (tg.Message, error) {
	cl, err := s.readyClient()
	if err != nil {
		return tg.Message{}, err
	}
	var p struct {
		ChatID          tdInt `json:"chat_id"`
		MessageThreadID tdInt `json:"message_thread_id"`
		Options         *struct {
			Type                string `json:"@type"`
			DisableNotification bool   `json:"disable_notification"`
		} `json:"options"`
		InputMessageContent *struct {
			Type     string `json:"@type"`
			Document *struct {
				Type string `json:"@type"`
				ID   string `json:"id"`
			} `json:"document"`
			Caption *struct {
				Text string `json:"text"`
			} `json:"caption"`
		} `json:"input_message_content"`
	}
	if err := r.params(&p); err != nil {
		return tg.Message{}, err
	}
	content := p.InputMessageContent
	switch {
	case content == nil:
		return tg.Message{}, tdError(400, "Message content must be non-empty")
	case content.Type != "inputMessageDocument":
		return tg.Message{}, notSimulated("sending " + content.Type)
	case content.Document == nil || content.Document.Type != "inputFileRemote":
		return tg.Message{}, notSimulated("sending a document other than inputFileRemote")
	}
	var caption string
	if content.Caption != nil {
		caption = content.Caption.Text
	}
	var opts tg.SendOptions
	if p.Options != nil {
		if p.Options.Type != "messageSendOptions" {
			return tg.Message{}, tdError(400, "Failed to parse JSON object as TDLib request: wrong options type %q", p.Options.Type)
		}
		opts.Silent = p.Options.DisableNotification
	}
	return cl.SendDocumentTo(s.ctx, tg.ChatID(p.ChatID), int64(p.MessageThreadID), content.Document.ID, caption, opts)
}
