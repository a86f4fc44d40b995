package tgsim

import (
	"context"
	"strings"

	"stashd/tg"
)

// SearchPublicChat implements tg.Client. Like TDLib it finds any public
// chat, member or not (getChat on a chat the account is not in still
// fails). A name the session does not know already (a chat of the
// account's, or one it resolved before) is the server's to resolve, which
// waits while the account is offline.
func (c *Client) SearchPublicChat(ctx context.Context, username string) (tg.Chat, error) {
	return call(ctx, c, tg.MethodSearchPublicChat, func() (tg.Chat, error) {
		for _, ch := range c.w.chats {
			if ch.username == "" || !strings.EqualFold(ch.username, username) {
				continue
			}
			if !c.knows(ch) && !c.public[ch.id] {
				if err := c.needsServer(); err != nil {
					return tg.Chat{}, err
				}
			}
			if ch.private {
				return tg.Chat{}, errChannelPrivate()
			}
			c.learnPublic(ch)
			return tg.Chat{ID: ch.id, Kind: ch.kind, Title: ch.title, LastMessageID: ch.lastID()}, nil
		}
		if err := c.needsServer(); err != nil {
			return tg.Chat{}, err
		}
		return tg.Chat{}, errChatNotFound()
	})
}

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
