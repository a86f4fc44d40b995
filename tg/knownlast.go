package tg

import "context"

// learnLast notes the newest server message of a chat that u tells of: a
// new message, a chat's last message, a deletion (a message deleted was
// posted). Called by the pump for every update.
func (s *Session) learnLast(u Update) {
	var chat ChatID
	var id MessageID
	switch u := u.(type) {
	case NewMessage:
		chat, id = u.Message.ChatID, u.Message.ID
	case ChatLastMessage:
		chat, id = u.Chat, u.LastMessageID
	case MessagesDeleted:
		if u.FromCache || !u.IsPermanent {
			return
		}
		chat = u.Chat
		for _, d := range u.IDs {
			if d.IsServer() {
				id = max(id, d)
			}
		}
	default:
		return
	}
	if !id.IsServer() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastKnown == nil {
		s.lastKnown = make(map[ChatID]MessageID)
	}
	s.lastKnown[chat] = max(s.lastKnown[chat], id)
}

// KnownLast returns the newest message of chat the session knows was
// posted: the chat's last message as getChat answers it (from TDLib's
// memory, no request to Telegram), or a newer one an update told of,
// deleted since or not. TDLib answers getMessage with a 404 for a channel
// message newer than the last one the session learned through updates (a
// too new message not from update, MessagesManager::on_get_message),
// whether or not it exists, until the chat's difference brings it; a 404
// for a message at or below KnownLast is its deletion.
func (s *Session) KnownLast(ctx context.Context, chat ChatID) (MessageID, error) {
	c, err := s.GetChat(ctx, chat)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(c.LastMessageID, s.lastKnown[chat]), nil
}
