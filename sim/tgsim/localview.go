package tgsim

import (
	"cmp"
	"slices"

	"stashd/tg"
)

// A TDLib instance with a message database answers some requests from
// that database instead of the server:
//   - getMessage, for a message the database holds
//     (MessagesManager::get_message_force_from_server asks the server only
//     for a message it does not know), with the content the database
//     stored: an edit it did not hear of leaves it stale;
//   - getChat, whose last message is the newest the database heard of:
//     the chat as the directory's first session loaded it from the
//     server, then what its sessions' updates (updateNewMessage,
//     updateChatLastMessage) and requests told it. A channel's updates
//     reach only a session that opened it, so messages posted while no
//     session of the directory followed the channel (none ran, or none
//     opened it) stay unknown to it until a session opens the chat (TDLib
//     then fetches the channel's difference and announces the new last
//     message);
//   - searchChatMessages with an empty query and a filter, once the
//     database holds the chat's index for that filter (TDLib's
//     SearchChatMessagesRequest and the local branch of
//     MessagesManager::search_dialog_messages).
//
// The database learns a message, as it is at that moment, only when its
// session sees it: a message it sent, one received by updateNewMessage,
// or one a server request returned (getChatHistory, searchChatMessages, a
// getMessage of a message it did not hold). It learns an edit
// (updateMessageContent) only in a chat whose updates reach it, when it
// opens a chat (TDLib fetches the channel's difference, edits included),
// and when a download finds its file gone (TDLib's file reference repair
// reads the message from the server again), but not from a channel
// difference that is too long (learnDifference). It learns a deletion
// made elsewhere the same three ways, and at a reconnect in a chat it
// follows (updateDeleteMessages each time); until then getMessage and a
// local search answer with the deleted message. A channel the session
// has not opened receives no updateNewMessage, so messages other sessions
// post there (another account, another instance of the same account, a
// database restored from a backup) never reach the local index, and a
// local search does not find them. getChatHistory with only_local false
// from a message is answered from the server whenever the local history
// has holes, which a chat the session does not follow always may have;
// the simulator therefore answers it from the server and keeps what it
// returned. From the end (from_message_id 0), though, TDLib starts at the
// last message the database knows and asks the server nothing when it
// knows one (historyEnd), so messages newer than getChat's last message
// are not on the page.
//
// The database lives in the instance's database directory: an instance
// restarted on the same directory (ClientIn) finds what its predecessor
// stored; another directory starts empty. Config.ServerView turns the
// local view off (every request answered from the server's truth).

// localDB is one database directory's message store.
type localDB struct {
	// known holds the messages the directory's sessions saw, by chat, as
	// they were when last seen.
	known map[tg.ChatID]map[tg.MessageID]message
	// indexed holds, by chat, the lowest message id from which up the
	// database believes its document index complete (indexedAll: the
	// whole chat): server searchChatMessages pages with an empty query
	// and a filter, from the newest message down without a gap, filled
	// it. A search inside that range is answered locally, although
	// messages other sessions posted since never reached the index.
	indexed map[tg.ChatID]tg.MessageID
	// last holds, by chat, the last message the database knows (getChat's
	// last_message); a chat absent is loaded from the server at first use.
	// It is also the newest the session learned (TDLib's
	// last_new_message_id), which the session's own deletion of it does
	// not lower: shown holds the chat's last message then (moveLastOff),
	// until a newer one comes.
	last  map[tg.ChatID]tg.MessageID
	shown map[tg.ChatID]tg.MessageID
	// listsLoaded: an instance on the directory loaded the main chat
	// list ([0]) or the archive list ([1]) from the server, so the next
	// reads it from the database.
	listsLoaded [2]bool
	// files holds, by unique id, the downloads the directory's instances
	// left on disk, partial or complete: TDLib's file database, which the
	// next instance reads them from (recallFile).
	files map[string]localFile
	// tempFiles and permFiles number the files the directory's instances
	// create in temp/ and the nameless ones in documents/ (TDLib's
	// tmp_file_id and perm_file_id; filesdir.go).
	tempFiles, permFiles int
	// unsent holds the deletions written to the directory's binlog while
	// the account was offline, for the server (deleteOffline).
	unsent []pendingDelete
}

// indexedAll marks an index complete down to the chat's beginning.
const indexedAll tg.MessageID = 1

// localDB returns the store of database directory dir. w.mu is held.
func (a *account) localDB(dir string) *localDB {
	if a.local == nil {
		a.local = make(map[string]*localDB)
	}
	db := a.local[dir]
	if db == nil {
		db = &localDB{known: make(map[tg.ChatID]map[tg.MessageID]message), indexed: make(map[tg.ChatID]tg.MessageID),
			last: make(map[tg.ChatID]tg.MessageID), shown: make(map[tg.ChatID]tg.MessageID), files: make(map[string]localFile)}
		a.local[dir] = db
	}
	return db
}

// LocalView reports whether sessions answer local-capable requests from
// their own message database (Config.ServerView unset).
func (w *World) LocalView() bool { return !w.cfg.ServerView }

// remember stores messages the session saw in its database, as they are
// now. w.mu is held.
func (c *Client) remember(msgs ...*message) {
	if c.db == nil || c.closed {
		return
	}
	for _, m := range msgs {
		byID := c.db.known[m.chat]
		if byID == nil {
			byID = make(map[tg.MessageID]message)
			c.db.known[m.chat] = byID
		}
		byID[m.id] = *m
		if last, ok := c.db.last[m.chat]; ok && m.id > last {
			c.db.last[m.chat] = m.id
			delete(c.db.shown, m.chat)
		}
	}
}

// announceLast tells the session ch's last message is id
// (updateChatLastMessage), which its database takes as the chat's. w.mu
// is held.
func (c *Client) announceLast(ch *chat, id tg.MessageID) {
	if c.db != nil && !c.closed {
		c.db.last[ch.id] = id
		delete(c.db.shown, ch.id)
	}
	c.enqueue(tg.ChatLastMessage{Chat: ch.id, LastMessageID: id})
}

// lastMessage is ch's last message as getChat shows it: the database's,
// loaded from the server at the directory's first look at the chat (or
// always, without a local view). w.mu is held.
func (c *Client) lastMessage(ch *chat) tg.MessageID {
	if c.db == nil {
		return ch.lastID()
	}
	if shown, ok := c.db.shown[ch.id]; ok {
		return shown
	}
	last, ok := c.db.last[ch.id]
	if !ok {
		last = ch.lastID()
		c.db.last[ch.id] = last
	}
	return last
}

// historyEnd is where getChatHistory from the end of ch starts: the last
// message the session's database knows. TDLib reads the history from the
// end out of the session's own messages and asks the server only when it
// knows no last message (MessagesManager::get_history_impl: "if the last
// message is known, there are no reasons to get message history from
// server from the end"; get_dialog_history starts at d->last_message_id).
// Messages newer than that last message, which other sessions posted
// where this one receives no updates, are not on the page. 0 (no local
// view, or no last message known): the server's newest. w.mu is held.
func (c *Client) historyEnd(ch *chat) tg.MessageID {
	if c.w.cfg.ServerView || c.db == nil || ch.lastUnknown {
		return 0
	}
	return c.lastMessage(ch)
}

// hideTooNew drops from msgs, read from the server, the messages of ch
// newer than the last one the session's database learned through
// updates, and starts the chat's difference when it dropped any: TDLib
// ignores a channel's message received not through an update when it is
// newer than the dialog's last_new_message_id, and schedules
// get_channel_difference instead (MessagesManager::add_message_to_dialog,
// "too new message not from update"; the history and search answers drop
// them the same way). A basic group's or a private chat's too new message
// is dropped the same way (the check is on every kind of chat), with no
// difference to start: it comes with its update (getMessage of one does
// not even ask the server: get_message_force_from_server). A chat whose
// last message the session never learned is left alone, as is anything
// under Config.ServerView. The order of msgs is kept. w.mu is held.
func (c *Client) hideTooNew(ch *chat, msgs []*message) []*message {
	if c.w.cfg.ServerView || c.db == nil || c.closed {
		return msgs
	}
	last, ok := c.db.last[ch.id]
	if !ok {
		return msgs
	}
	kept := msgs[:0:0]
	for _, m := range msgs {
		if m.id <= last {
			kept = append(kept, m)
		}
	}
	if len(kept) < len(msgs) && !commonBox(ch) {
		c.fetchDifference(ch)
	}
	return kept
}

// commonBox reports whether ch's updates come in the account's common
// update box (basic groups and private chats) rather than in a channel
// difference of their own.
func commonBox(ch *chat) bool {
	return ch.kind == tg.KindBasicGroup || ch.kind == tg.KindPrivate
}

// startDifference is TDLib's getDifference as an instance starts: the
// account's common update box brings what basic groups and private chats
// received while no instance on the directory ran, as updateNewMessage
// (or, past a gap's worth, the last message alone), whether or not the
// chat is opened; channels wait for their own difference (openChat).
// The chats come in the order of their last messages, as the box numbers
// them (one chat's messages are not interleaved with another's). w.mu is
// held.
func (c *Client) startDifference(a *account) {
	var chats []*chat
	for id := range a.member {
		if ch := c.w.chats[id]; ch != nil && commonBox(ch) {
			chats = append(chats, ch)
		}
	}
	slices.SortFunc(chats, func(x, y *chat) int { return cmp.Or(cmp.Compare(x.lastID(), y.lastID()), cmp.Compare(x.id, y.id)) })
	for _, ch := range chats {
		c.catchUpLast(ch)
	}
}

// catchUpLast is TDLib's channel difference when the session opens ch: a
// last message newer than the database's is learned and announced, and
// the messages after the database's last come as updateNewMessage
// (MessagesManager::on_get_channel_difference adds them as from an
// update) unless they are more than a channel gap. A chat
// the account cannot read teaches nothing (open_dialog returns at once
// without read access). w.mu is held.
func (c *Client) catchUpLast(ch *chat) {
	if c.db == nil || c.closed {
		return
	}
	last, ok := c.db.last[ch.id]
	if !ok || last >= ch.lastID() || ch.private || ch.lostAccess || c.removedFrom(ch) {
		return
	}
	// The difference's new messages come as updateNewMessage, unless
	// there are more than a channel gap's worth: TDLib is then told the
	// difference is too long and learns the last message alone.
	var missed []*message
	for i := len(ch.msgs) - 1; i >= 0 && ch.msgs[i].id > last; i-- {
		missed = append(missed, ch.msgs[i])
	}
	if len(missed) <= c.w.cfg.ChannelGap {
		for i := len(missed) - 1; i >= 0; i-- {
			c.remember(missed[i])
			c.enqueue(tg.NewMessage{Message: c.view(missed[i])})
		}
	}
	if ch.lastUnknown {
		// Learned, though getChat goes on reporting it unknown.
		c.db.last[ch.id] = ch.lastID()
		return
	}
	c.announceLast(ch, ch.lastID())
}

// relearn brings the database's copy of m, if it holds one, up to date:
// the session heard of an edit. w.mu is held.
func (c *Client) relearn(m *message) {
	if c.db == nil || c.closed {
		return
	}
	if _, ok := c.db.known[m.chat][m.id]; ok {
		c.db.known[m.chat][m.id] = *m
	}
}

// learnDifference is what the session learns from ch's channel
// difference: its deletions and edits (relearnChat), unless the
// difference is too long. TDLib then hears of neither
// (updates.channelDifferenceTooLong carries the chat's last messages
// alone): MessagesManager::on_get_channel_dialog keeps the messages its
// database holds, readable by getMessage as they were, and forgets which
// stretches of history and of the search index the database had whole
// (invalidate_message_indexes). The new messages are catchUpLast's. w.mu
// is held.
func (c *Client) learnDifference(ch *chat) {
	if c.differenceTooLong(ch) {
		delete(c.db.indexed, ch.id)
		return
	}
	c.relearnChat(ch)
}

// differenceTooLong reports whether the server would answer the
// session's difference of ch as too long: more than a channel gap of new
// messages since the last the database knows (the server counts edits
// and deletions too; the simulator counts the new messages). w.mu is
// held.
func (c *Client) differenceTooLong(ch *chat) bool {
	if c.db == nil {
		return false
	}
	last, ok := c.db.last[ch.id]
	if !ok {
		return false
	}
	i, _ := ch.index(last + 1)
	return len(ch.msgs)-i > c.w.cfg.ChannelGap
}

// relearnChat brings every message of ch the database holds up to date:
// TDLib fetched the chat's difference (opening it), whose deletions it
// applies and announces (updateDeleteMessages). w.mu is held.
func (c *Client) relearnChat(ch *chat) {
	if c.db == nil || c.closed {
		return
	}
	var gone []tg.MessageID
	for id := range c.db.known[ch.id] {
		if m := ch.find(id); m != nil {
			c.db.known[ch.id][id] = *m
		} else {
			gone = append(gone, id)
		}
	}
	c.learnDeleted(ch.id, gone)
}

// learnDeleted is the session learning that ids of chat were deleted:
// its database forgets them, the instance remembers them as deleted
// (knowsDeleted), and it announces them (updateDeleteMessages, in
// ascending order). Nothing for no ids. w.mu is held.
func (c *Client) learnDeleted(chat tg.ChatID, ids []tg.MessageID) {
	if len(ids) == 0 {
		return
	}
	ids = slices.Sorted(slices.Values(ids))
	if c.db != nil {
		for _, id := range ids {
			delete(c.db.known[chat], id)
		}
	}
	if c.deleted == nil {
		c.deleted = make(map[tg.ChatID]map[tg.MessageID]bool)
	}
	if c.deleted[chat] == nil {
		c.deleted[chat] = make(map[tg.MessageID]bool)
	}
	for _, id := range ids {
		c.deleted[chat][id] = true
	}
	c.enqueue(tg.MessagesDeleted{Chat: chat, IDs: ids, IsPermanent: true})
}

// knowsDeleted reports whether the instance learned that message id of
// chat was deleted for good. TDLib keeps those ids in memory
// (Dialog::deleted_message_ids, is_deleted_message): getMessage of one
// answers 404 without asking the server, and deleteMessages and the
// history leave it out. Under Config.ServerView nothing is known locally.
// w.mu is held.
func (c *Client) knowsDeleted(chat tg.ChatID, id tg.MessageID) bool {
	return !c.w.cfg.ServerView && c.deleted[chat][id]
}

// repairReference reads again from the server every message the database
// holds with file uid: TDLib's file reference repair, after a download
// found the file gone. A message the server no longer has is deleted from
// the database and announced (MessagesManager::on_get_empty_messages).
// w.mu is held.
func (c *Client) repairReference(uid string) {
	if c.db == nil || c.closed {
		return
	}
	for chat, byID := range c.db.known {
		ch := c.w.chats[chat]
		var gone []tg.MessageID
		for id, m := range byID {
			if m.doc == nil || m.doc.uid != uid || ch == nil {
				continue
			}
			if cur := ch.find(id); cur != nil {
				byID[id] = *cur
			} else {
				gone = append(gone, id)
			}
		}
		c.learnDeleted(chat, gone)
	}
}

// stored returns the database's copy of message id of ch, when getMessage
// is answered locally: the local view is on and the database holds it. A
// message deleted on the server since is returned until the session
// learns of the deletion: its update (a chat whose updates reach the
// session), the chat's difference (opening it), or a file reference
// repair that reads it again. w.mu is held.
func (c *Client) stored(ch *chat, id tg.MessageID) (*message, bool) {
	if c.w.cfg.ServerView || c.db == nil {
		return nil, false
	}
	m, ok := c.db.known[ch.id][id]
	return &m, ok
}

// indexable reports whether q is a request TDLib may answer from its
// database: an empty query with a filter over a whole chat the session
// does not follow by updates, with no offset. w.mu is held.
func (c *Client) indexable(ch *chat, q tg.Search) bool {
	return !c.w.cfg.ServerView && c.db != nil && q.Query == "" && q.Filter != tg.FilterNone &&
		q.ThreadID == 0 && q.Offset == 0 && !c.receivesMessages(ch)
}

// searchLocal answers q from the session's database when the database's
// index covers the whole page q asks for; ok is false when TDLib would
// ask the server. w.mu is held.
func (c *Client) searchLocal(ch *chat, q tg.Search) (page []*message, ok bool) {
	if !c.indexable(ch, q) {
		return nil, false
	}
	low := c.db.indexed[ch.id]
	if low == 0 || q.FromMessageID != 0 && q.FromMessageID < low {
		return nil, false
	}
	page = c.w.searchWindow(c.localChat(ch), q)
	if low != indexedAll && (len(page) < q.Limit || page[len(page)-1].id < low) {
		return nil, false
	}
	return page, true
}

// localChat returns the part of ch the session's database holds, as a
// chat to search: its known messages, ascending, as the database stored
// them. So a local answer lacks messages, may show stale content, and
// holds a message deleted since until the session learns of the deletion
// (stored). w.mu is held.
func (c *Client) localChat(ch *chat) *chat {
	local := &chat{id: ch.id, kind: ch.kind, topics: ch.topics}
	for _, m := range c.db.known[ch.id] {
		local.msgs = append(local.msgs, &m)
	}
	slices.SortFunc(local.msgs, func(a, b *message) int { return cmp.Compare(a.id, b.id) })
	return local
}

// noteServerSearch stores what a server searchChatMessages returned and,
// for a request of the kind TDLib answers locally, extends the chat's
// index: a page from the newest message, or one continuing the indexed
// range downward, makes the index complete down to its oldest message, or
// to the chat's beginning when the page was the last (end). w.mu is held.
func (c *Client) noteServerSearch(ch *chat, q tg.Search, page []*message, end bool) {
	c.remember(page...)
	if !c.indexable(ch, q) {
		return
	}
	low := c.db.indexed[ch.id]
	if q.FromMessageID != 0 && (low == 0 || q.FromMessageID < low-1) {
		return // not contiguous with the indexed range
	}
	switch {
	case end:
		low = indexedAll
	case len(page) > 0 && (low == 0 || page[len(page)-1].id < low):
		low = page[len(page)-1].id
	}
	if low != 0 {
		c.db.indexed[ch.id] = low
	}
}
