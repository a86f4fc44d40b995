package tgsim

import "stashd/tg"

// RemoveMember takes account's access to chat away, or gives it back,
// while the chat's other members keep theirs: the way TDLib shows a
// channel or supergroup one account was removed from (kicked, banned, or
// it left on another device). Its sessions receive tg.ChatAccessLost
// (updateSupergroup with status left) and still know the chat locally
// (getChat and openChat succeed); its server calls about the chat
// (getMessage, getForumTopic, createForumTopic, …) fail with 400 "Can't
// access the chat", wrapping tg.ErrNoAccess; its sessions refuse its sends
// there with 400 "Have no write access to the chat", and a send made
// before reaches the server as a non-member's (CHANNEL_PRIVATE). Given
// back, the account's sessions take sends there again. LoseAccess does
// the same for every member at once.
func (w *World) RemoveMember(account string, chat tg.ChatID, removed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	c := w.mustChat(chat)
	if a.removed == nil {
		a.removed = make(map[tg.ChatID]bool)
	}
	if removed == a.removed[c.id] {
		return
	}
	a.removed[c.id] = removed
	for _, cl := range a.clients {
		if removed {
			cl.learnLeft(c)
		} else {
			delete(cl.left, c.id)
		}
	}
}

// removedFrom reports whether this session's account was removed from ch
// alone (RemoveMember). w.mu is held.
func (c *Client) removedFrom(ch *chat) bool {
	return c.w.accounts[c.account].removed[ch.id]
}
