package tgsim

import "stashd/tg"

// RemoveMember takes account's access to chat away, or gives it back,
// while the chat's other members keep theirs: the way TDLib shows a
// channel, supergroup or basic group one account was removed from
// (kicked, banned, or it left on another device). Its sessions receive
// tg.ChatAccessLost (updateSupergroup with status left, updateBasicGroup
// with status banned; none for a private chat) and still know the chat locally
// (getChat and openChat succeed); its server calls about the chat
// (getMessage, getForumTopic, createForumTopic, …) fail with 400 "Can't
// access the chat", wrapping tg.ErrNoAccess; its sessions refuse its sends
// there with 400 "Have no write access to the chat", and a send made
// before reaches the server as a non-member's (CHANNEL_PRIVATE). Given
// back, the account's sessions take sends there again, and receive
// tg.ChatAccessHeld (the status member). LoseAccess does the same for
// every member at once.
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
			cl.rejoin(c)
		}
	}
}

// BanMember is RemoveMember for an account banned from chat: a send its
// sessions made before they were told reaches the server as a banned
// member's, refused with 400 USER_BANNED_IN_CHANNEL (which TDLib passes
// on as it passes CHANNEL_PRIVATE).
func (w *World) BanMember(account string, chat tg.ChatID, banned bool) {
	w.mu.Lock()
	a := w.mustAccount(account)
	if a.banned == nil {
		a.banned = make(map[tg.ChatID]bool)
	}
	a.banned[w.mustChat(chat).id] = banned
	w.mu.Unlock()
	w.RemoveMember(account, chat, banned)
}

// removedFrom reports whether this session's account was removed from ch
// alone (RemoveMember). w.mu is held.
func (c *Client) removedFrom(ch *chat) bool {
	return c.w.accounts[c.account].removed[ch.id]
}

// SetPrivate makes chat inaccessible (or accessible again): while private,
// every request about it fails with 400 CHANNEL_PRIVATE, a permanent error,
// and no update about it is delivered. A send is the exception, as the
// sessions' TDLib does not know: it makes the message, the server refuses
// it (updateMessageSendFailed with 400 CHANNEL_PRIVATE), and that session
// then takes the account as having left the chat (ChatAccessLost),
// refusing its next sends there itself. Made accessible again, the chat
// takes sends from every session.
func (w *World) SetPrivate(chat tg.ChatID, private bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	c.private = private
	if !private {
		w.rejoined(c)
	}
}

// rejoined forgets that the sessions of c's members left it: access is
// back (TDLib hears the account's new status in updateSupergroup or
// updateBasicGroup). w.mu is held.
func (w *World) rejoined(c *chat) {
	for _, name := range c.members {
		for _, cl := range w.accounts[name].clients {
			cl.rejoin(c)
		}
	}
}

// LoseAccess takes away (or gives back) every member's access to chat, the
// way TDLib shows a channel the account was removed from: getChat and
// openChat still succeed from local state, but server calls
// (searchChatMessages, getMessage, getChatMessageByDate, getForumTopic,
// downloadFile of its files) fail with 400 "Can't access the chat", a
// permanent error wrapping tg.ErrNoAccess, and no update about it arrives
// but one: clients of the members receive tg.ChatAccessLost (TDLib's
// updateSupergroup with status left, or updateBasicGroup with status
// banned). Their sessions then refuse sends
// there with 400 "Have no write access to the chat"; a send made before
// fails when the server gets it (updateMessageSendFailed, CHANNEL_PRIVATE).
func (w *World) LoseAccess(chat tg.ChatID, lost bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	if lost && !c.lostAccess {
		// TDLib reports the account's new status (left, banned) in
		// updateSupergroup or updateBasicGroup (reportLeft).
		w.eachClient(c, func(cl *Client) { cl.reportLeft(c) })
	}
	c.lostAccess = lost
	if !lost {
		w.rejoined(c)
	}
}
