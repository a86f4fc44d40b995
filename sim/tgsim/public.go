package tgsim

import "stashd/tg"

// learnPublic records that this session resolved ch by its public name.
// An account that is not a member of a public channel or supergroup can
// still read it: TDLib learns the chat from searchPublicChat, answers
// getChat and openChat for it, and reads its history, messages and files
// from the server. It announces the supergroup with the account's status,
// left (updateSupergroup with chatMemberStatusLeft, tg.ChatAccessLost at
// the port), although nothing was lost. Updates about such a chat come
// only while the session has it open (World.eachOpenedNonMember).
// Called with w.mu held.
func (c *Client) learnPublic(ch *chat) {
	if ch.isMem[c.account] || c.public[ch.id] {
		return
	}
	switch ch.kind {
	case tg.KindChannel, tg.KindSupergroup, tg.KindForum:
	default:
		return
	}
	c.public[ch.id] = true
	c.enqueue(tg.ChatAccessLost{Chat: ch.id})
}
