package tgsim

import (
	"context"
	"slices"

	"stashd/tg"
)

// LoadChats implements tg.Client: it loads both chat lists, main and
// archive. Until it has run, every chat is unknown.
func (c *Client) LoadChats(ctx context.Context) error {
	return call0(ctx, c, tg.MethodLoadChats, func() error {
		return c.loadLists(false, true)
	})
}

// LoadChatList loads one chat list, as one TDLib loadChats request does:
// the main list, or the archive list when archive is set. Chats of a list
// not loaded stay unknown ("Chat not found").
func (c *Client) LoadChatList(ctx context.Context, archive bool) error {
	return call0(ctx, c, tg.MethodLoadChats, func() error {
		return c.loadLists(archive, archive)
	})
}

// loadLists loads the main list unless archiveOnly, and the archive list
// when archive is set. TDLib reads a list from its database when an
// instance on the directory loaded it before, and asks the server
// otherwise: while the account is offline that waits for the reconnect.
// w.mu is held.
func (c *Client) loadLists(archiveOnly, archive bool) error {
	db := c.db
	if db != nil && !c.w.cfg.ServerView && (!archiveOnly && !db.listsLoaded[0] || archive && !db.listsLoaded[1]) {
		if err := c.needsServer(); err != nil {
			return err
		}
	}
	if !archiveOnly {
		c.loaded = true
	}
	if archive {
		c.archiveLoaded = true
	}
	if db != nil {
		db.listsLoaded[0] = db.listsLoaded[0] || c.loaded
		db.listsLoaded[1] = db.listsLoaded[1] || c.archiveLoaded
	}
	c.announceStatus()
	return nil
}

// announceStatus reports the account's status in the groups and channels
// it loads, as TDLib does with updateSupergroup and updateBasicGroup for
// each: left for those it lost (ChatAccessLost, which a session started
// after the loss hears too), a member of the others (ChatAccessHeld), as
// far as the session knows: a chat made private behind its back still
// shows it a member. w.mu is held.
func (c *Client) announceStatus() {
	ids := make([]tg.ChatID, 0)
	for id := range c.w.accounts[c.account].member {
		if ch := c.w.chats[id]; c.knows(ch) && hasStatus(ch) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		switch ch := c.w.chats[id]; {
		case ch.lostAccess || c.removedFrom(ch):
			c.reportLeft(ch)
		case !c.left[id]:
			c.reportHeld(ch)
		}
	}
}

// hasStatus reports whether TDLib reports the account's status in ch: a
// supergroup's or channel's in updateSupergroup, a basic group's in
// updateBasicGroup. A private chat has none, and the updateBasicGroup of
// a group upgraded to a supergroup tells the upgrade (ChatUpgraded): its
// status, "banned" as TDLib shows every deactivated group, is no loss.
func hasStatus(ch *chat) bool {
	return ch.kind != tg.KindPrivate && ch.upgradedTo == 0
}
