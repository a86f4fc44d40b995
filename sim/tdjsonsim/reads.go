package tdjsonsim

import (
	"context"
	"encoding/json"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// chat writes c as TDLib's chat, remembering the kind of its supergroup
// for getSupergroup: TDLib knows a supergroup once it has shown its chat.
func (s *session) chat(c tg.Chat) object {
	if c.Kind != tg.KindPrivate && c.Kind != tg.KindBasicGroup {
		s.mu.Lock()
		s.kinds[supergroupID(c.ID)] = c.Kind
		s.mu.Unlock()
	}
	return chatObject(c)
}

// loadChats loads the main or the archive chat list: the first call for a
// list answers ok, later ones 404, as TDLib answers once every chat is loaded. Each is a tgsim
// call, so the counts show every request the adapter made.
func (s *session) loadChats(ctx context.Context, cl *tgsim.Client, r *request) (object, error) {
	var p struct {
		ChatList *typeOnly `json:"chat_list"`
		Limit    tdInt     `json:"limit"`
	}
	if err := r.params(&p); err != nil {
		return nil, err
	}
	list := "chatListMain" // TDLib's default for a null chat_list
	if p.ChatList != nil {
		list = p.ChatList.Type
	}
	if list != "chatListMain" && list != "chatListArchive" {
		return nil, notSimulated("chat list " + list)
	}
	if p.Limit <= 0 {
		return nil, tdError(400, "Parameter limit must be positive")
	}
	if err := cl.LoadChatList(ctx, list == "chatListArchive"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	again := s.chatsLoaded[list]
	s.chatsLoaded[list] = true
	s.mu.Unlock()
	if again {
		return nil, tdError(404, msgNotFound)
	}
	return okObject(), nil
}

func (s *session) searchChatMessages(ctx context.Context, cl *tgsim.Client, r *request) (object, error) {
	var p struct {
		ChatID               tdInt           `json:"chat_id"`
		Query                string          `json:"query"`
		SenderID             json.RawMessage `json:"sender_id"`
		FromMessageID        tdInt           `json:"from_message_id"`
		Offset               tdInt           `json:"offset"`
		Limit                tdInt           `json:"limit"`
		Filter               *typeOnly       `json:"filter"`
		MessageThreadID      tdInt           `json:"message_thread_id"`
		SavedMessagesTopicID tdInt           `json:"saved_messages_topic_id"`
	}
	if err := r.params(&p); err != nil {
		return nil, err
	}
	if len(p.SenderID) > 0 && string(p.SenderID) != "null" {
		return nil, notSimulated("searchChatMessages by sender")
	}
	if p.SavedMessagesTopicID != 0 {
		return nil, notSimulated("searchChatMessages in Saved Messages topics")
	}
	filter := tg.FilterNone
	if p.Filter != nil {
		switch p.Filter.Type {
		case "searchMessagesFilterDocument":
			filter = tg.FilterDocument
		case "searchMessagesFilterEmpty":
		default:
			return nil, notSimulated("search filter " + p.Filter.Type)
		}
	}
	msgs, err := cl.SearchChatMessages(ctx, tg.Search{
		Chat: tg.ChatID(p.ChatID), Query: p.Query, FromMessageID: tg.MessageID(p.FromMessageID),
		Offset: int(p.Offset), Limit: int(p.Limit), Filter: filter, ThreadID: int64(p.MessageThreadID),
	})
	if err != nil {
		return nil, err
	}
	return foundChatMessagesObject(msgs), nil
}

// downloadFile starts an asynchronous download of the whole file; partial
// and synchronous downloads are not simulated.
func downloadFile(ctx context.Context, cl *tgsim.Client, r *request) (object, error) {
	var p struct {
		FileID      tdInt `json:"file_id"`
		Priority    tdInt `json:"priority"`
		Offset      tdInt `json:"offset"`
		Limit       tdInt `json:"limit"`
		Synchronous bool  `json:"synchronous"`
	}
	if err := r.params(&p); err != nil {
		return nil, err
	}
	switch {
	case p.Priority < 1 || p.Priority > 32:
		return nil, tdError(400, "Priority must be between 1 and 32")
	case p.Synchronous:
		return nil, notSimulated("synchronous downloadFile")
	case p.Offset != 0 || p.Limit != 0:
		return nil, notSimulated("partial downloadFile")
	}
	f, err := cl.DownloadFile(ctx, int32(p.FileID))
	if err != nil {
		return nil, err
	}
	return fileObject(f), nil
}

// viewOptions are the options of m as cl's session shows it: the
// session's own message being sent, or whose send failed, is outgoing
// and carries its sending_state (TDLib keeps both in the chat's history).
func viewOptions(cl *tgsim.Client) func(tg.Message) messageOptions {
	return func(m tg.Message) messageOptions {
		if m.ID.IsServer() {
			return messageOptions{} // no need to ask the world
		}
		switch st, err := cl.MessageSendingState(m.ChatID, m.ID); st {
		case tgsim.SendPending:
			return messageOptions{outgoing: true, sendingState: pendingState()}
		case tgsim.SendFailedState:
			return messageOptions{outgoing: true, sendingState: failedState(errorFor(err))}
		}
		return messageOptions{}
	}
}
