package tgsim

import (
	"context"
	"slices"

	"stashd/tg"
)

// GetChats implements tg.Directory (getChats): the chats of the account in
// the main list, or in the archive list when archive is set, by id. As in
// TDLib it loads the list as it goes: afterwards its chats are known to
// getChat. A chat the account lost access to stays in its list (TDLib
// keeps it locally); only server calls show the loss.
func (c *Client) GetChats(ctx context.Context, archive bool, limit int) ([]tg.ChatID, error) {
	return call(ctx, c, tg.MethodGetChats, func() ([]tg.ChatID, error) {
		if limit <= 0 {
			return nil, errBadRequest("Parameter limit must be positive")
		}
		if archive {
			c.archiveLoaded = true
		} else {
			c.loaded = true
		}
		var ids []tg.ChatID
		for id, ch := range c.w.chats {
			if ch.isMem[c.account] && ch.archived == archive && ch.upgradedTo == 0 {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		if len(ids) > limit {
			ids = ids[:limit]
		}
		return ids, nil
	})
}

// GetSupergroup implements tg.Directory (getSupergroup, a local call).
func (c *Client) GetSupergroup(ctx context.Context, chat tg.ChatID) (tg.Supergroup, error) {
	return call(ctx, c, tg.MethodGetSupergroup, func() (tg.Supergroup, error) {
		return c.supergroupLocked(chat)
	})
}

// Supergroup is GetSupergroup without counting a request, for the
// TDLib-JSON face, which answers getSupergroup from the same state.
func (c *Client) Supergroup(chat tg.ChatID) (tg.Supergroup, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.supergroupLocked(chat)
}

// supergroupLocked models the account's standing, with w.mu held: a
// member without write access (SetWriteAccess) is a plain member of a
// channel, a restricted member of a supergroup; with it, an administrator
// allowed to post of a channel, a member of a supergroup, and an
// administrator allowed to manage topics of a forum (the simulator lets
// such an account create topics). Once access is lost the status is left,
// as TDLib's updateSupergroup reports it.
func (c *Client) supergroupLocked(chat tg.ChatID) (tg.Supergroup, error) {
	ch := c.w.chats[chat]
	if ch == nil || !ch.isMem[c.account] {
		return tg.Supergroup{}, errBadRequest("Supergroup not found")
	}
	if ch.kind != tg.KindChannel && ch.kind != tg.KindSupergroup && ch.kind != tg.KindForum {
		return tg.Supergroup{}, errBadRequest("Chat is not a supergroup or channel")
	}
	s := tg.Supergroup{Username: ch.username, IsChannel: ch.kind == tg.KindChannel, IsForum: ch.kind == tg.KindForum}
	readOnly := c.w.accounts[c.account].readOnly[chat]
	switch {
	case ch.lostAccess || ch.private:
		s.Status = tg.MemberLeft
	case readOnly && s.IsChannel:
		s.Status = tg.MemberMember
	case readOnly:
		s.Status = tg.MemberRestricted
	case s.IsChannel:
		s.Status, s.CanPost = tg.MemberAdministrator, true
	case s.IsForum:
		s.Status, s.CanPost, s.CanManageTopics = tg.MemberAdministrator, true, true
	default:
		s.Status, s.CanPost = tg.MemberMember, true
	}
	return s, nil
}

var _ tg.Directory = (*Client)(nil)
