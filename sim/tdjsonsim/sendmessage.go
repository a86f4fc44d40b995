package tdjsonsim

import (
	"stashd/sim/tgsim"
	"stashd/tg"
)

// sendMessage answers a send with its temporary message, then releases
// its outcome to the forwarder.
func (s *session) sendMessage(r *request) {
	s.answerSend(r, func() ([]tg.Message, object, error) {
		tmp, err := s.send(r)
		if err != nil {
			return nil, nil, err
		}
		return []tg.Message{tmp}, pendingMessageObject(tmp), nil
	})
}

// sendMessageAlbum answers an album's send with its temporary messages,
// then releases their outcomes to the forwarder.
func (s *session) sendMessageAlbum(r *request) {
	s.answerSend(r, func() ([]tg.Message, object, error) {
		tmps, err := s.sendAlbum(r)
		if err != nil {
			return nil, nil, err
		}
		list := make([]object, len(tmps))
		for i, m := range tmps {
			list[i] = pendingMessageObject(m)
		}
		return tmps, object{{"@type", "messages"}, {"total_count", len(tmps)}, {"messages", list}}, nil
	})
}

// answerSend runs send, which makes temporary messages and the answer
// carrying them, answers r, and then records the messages as answered:
// the forwarder holds their outcomes back until then, as TDLib answers a
// send before it reports its outcome.
func (s *session) answerSend(r *request, send func() ([]tg.Message, object, error)) {
	s.mu.Lock()
	s.sending++
	s.mu.Unlock()
	tmps, res, err := send()
	s.c.reply(s.id, r, s.result(res, err))
	s.mu.Lock()
	s.sending--
	for _, m := range tmps {
		s.sent[m.ID] = m
	}
	s.answered.Broadcast()
	s.mu.Unlock()
}

// pendingMessageObject is a temporary message as a send's answer shows it.
func pendingMessageObject(m tg.Message) object {
	return messageObject(m, messageOptions{outgoing: true, sendingState: pendingState()})
}

// send sends a document already on Telegram (inputFileRemote), the only
// message stashd sends, and returns the temporary message. Of options,
// disable_notification is passed on (the world records it per send);
// reply_to and reply_markup change nothing the simulator models and are
// ignored.
func (s *session) send(r *request) (tg.Message, error) {
	cl, p, items, opts, err := s.sendParams(r)
	if err != nil {
		return tg.Message{}, err
	}
	return cl.SendDocumentTo(s.ctx, tg.ChatID(p.ChatID), int64(p.MessageThreadID), items[0].RemoteFileID, items[0].Caption, opts)
}

// sendAlbum sends documents already on Telegram as one album
// (sendMessageAlbum) and returns the temporary messages.
func (s *session) sendAlbum(r *request) ([]tg.Message, error) {
	cl, p, items, opts, err := s.sendParams(r)
	if err != nil {
		return nil, err
	}
	return cl.SendDocumentAlbum(s.ctx, tg.ChatID(p.ChatID), int64(p.MessageThreadID), items, opts)
}

// sendRequest is sendMessage's and sendMessageAlbum's parameters as far as
// the simulator reads them: one content, or an album's.
type sendRequest struct {
	ChatID               tdInt              `json:"chat_id"`
	MessageThreadID      tdInt              `json:"message_thread_id"`
	Options              *sendOptions       `json:"options"`
	InputMessageContent  *inputDocMessage   `json:"input_message_content"`
	InputMessageContents []*inputDocMessage `json:"input_message_contents"`
}

// sendParams reads a send's parameters for a ready session's client: its
// documents as album items (one for sendMessage) and its options.
func (s *session) sendParams(r *request) (*tgsim.Client, sendRequest, []tg.AlbumItem, tg.SendOptions, error) {
	var p sendRequest
	cl, err := s.readyClient()
	if err == nil {
		err = r.params(&p)
	}
	if err != nil {
		return nil, p, nil, tg.SendOptions{}, err
	}
	contents := p.InputMessageContents
	if r.Type == tg.MethodSendMessage {
		contents = []*inputDocMessage{p.InputMessageContent}
	}
	items := make([]tg.AlbumItem, len(contents))
	for i, c := range contents {
		if items[i].RemoteFileID, items[i].Caption, err = c.document(); err != nil {
			return nil, p, nil, tg.SendOptions{}, err
		}
	}
	opts, err := p.Options.port()
	return cl, p, items, opts, err
}

// sendOptions is messageSendOptions as far as the simulator reads it.
type sendOptions struct {
	Type                string `json:"@type"`
	DisableNotification bool   `json:"disable_notification"`
}

func (o *sendOptions) port() (tg.SendOptions, error) {
	if o == nil {
		return tg.SendOptions{}, nil
	}
	if o.Type != "messageSendOptions" {
		return tg.SendOptions{}, tdError(400, "Failed to parse JSON object as TDLib request: wrong options type %q", o.Type)
	}
	return tg.SendOptions{Silent: o.DisableNotification}, nil
}

// inputDocMessage is an InputMessageContent; the simulator sends only
// inputMessageDocument of an inputFileRemote.
type inputDocMessage struct {
	Type     string `json:"@type"`
	Document *struct {
		Type string `json:"@type"`
		ID   string `json:"id"`
	} `json:"document"`
	Caption *struct {
		Text string `json:"text"`
	} `json:"caption"`
}

// document returns the remote file id and caption of c.
func (c *inputDocMessage) document() (remote, caption string, err error) {
	switch {
	case c == nil:
		return "", "", tdError(400, "Message content must be non-empty")
	case c.Type != "inputMessageDocument":
		return "", "", notSimulated("sending " + c.Type)
	case c.Document == nil || c.Document.Type != "inputFileRemote":
		return "", "", notSimulated("sending a document other than inputFileRemote")
	}
	if c.Caption != nil {
		caption = c.Caption.Text
	}
	return c.Document.ID, caption, nil
}
