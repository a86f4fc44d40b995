package tgsim

import (
	"context"
	"slices"

	"stashd/tg"
)

// SetDeleteRights gives account the right to delete other members'
// messages in chat (an administrator's can_delete_messages), or takes it
// away. Without it an account deletes only the messages it sent.
func (w *World) SetDeleteRights(account string, chat tg.ChatID, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	w.mustChat(chat)
	if a.canDelete == nil {
		a.canDelete = make(map[tg.ChatID]bool)
	}
	a.canDelete[chat] = ok
}

// Deleted returns how many messages of chat accounts deleted with
// deleteMessages.
func (w *World) Deleted(chat tg.ChatID) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deletedIn[chat]
}

// DeleteMessages implements tg.Client (deleteMessages). Like TDLib, an id
// that is not a valid message id fails the request with 400 "Invalid message
// identifier", and a message the account may not delete (another sender's,
// without SetDeleteRights) fails it with 400 "Message can't be deleted"
// before anything is deleted. TDLib deletes on the server only the messages
// its session holds (in memory or in its message database:
// MessagesManager::delete_messages asks get_message_force, and leaves an id
// it does not find out of the server request, without an error); so does the
// simulator, with the local view on: an id the session never loaded (never
// sent, received, or read from the server, and not the chat's last message
// as the session knows it), or one it knows was deleted, is skipped, and
// the message stays in the chat. An id the session holds that the server
// deleted since is dropped from its database and announced to it
// (MessagesDeleted). Under Config.ServerView every id is looked up on the
// server, and one that does not exist is skipped. Deleted messages leave
// the chat's history, search and World.Messages for good, for every member
// whatever revoke says (the simulator models channels and supergroups,
// where a deletion is always for everyone). The client, and every client
// that opened the chat, receives MessagesDeleted for them; members receive
// updateChatLastMessage when the newest message went. World.Calls counts
// the request.
//
// While the account is offline, TDLib deletes the messages from its own
// database at once (updateDeleteMessages) and answers the request only
// when the server has: the request waits for the reconnect. The server's
// deletion is written to TDLib's binlog first, so it reaches the server at
// the reconnect even when the caller gave up, and after a restart on the
// same database directory when the client closed before (deleteOffline).
func (c *Client) DeleteMessages(ctx context.Context, chat tg.ChatID, ids []tg.MessageID, revoke bool) error {
	return call0(ctx, c, tg.MethodDeleteMessages, func() error {
		w := c.w
		ch, err := c.serverChat(chat)
		if err != nil {
			return err
		}
		// A failed local message (see failSend) is deleted from this
		// session's view only.
		local, ids := c.deleteFailed(chat, ids)
		if len(local) > 0 {
			c.enqueue(tg.MessagesDeleted{Chat: chat, IDs: local, IsPermanent: true})
		}
		for _, id := range ids {
			if id <= 0 {
				return errBadRequest("Invalid message identifier")
			}
		}
		if c.reconnected() != nil && !w.cfg.ServerView && c.db != nil {
			return c.deleteOffline(ch, ids)
		}
		var del, gone []tg.MessageID
		for _, id := range ids {
			_, held := c.holds(ch, id)
			if slices.Contains(del, id) || slices.Contains(gone, id) || c.knowsDeleted(chat, id) || !held && !w.cfg.ServerView {
				continue
			}
			// Asked of the server: under Config.ServerView the query
			// waits for TDLib's connection.
			if err := c.needsServer(); err != nil {
				return err
			}
			m := ch.find(id)
			if m == nil {
				if held {
					gone = append(gone, id)
				}
				continue
			}
			if !c.mayDelete(ch, m) {
				return errBadRequest("Message can't be deleted")
			}
			del = append(del, id)
		}
		// A message the session held but the server deleted since: TDLib
		// deletes it from its database too, and says so.
		c.learnDeleted(chat, gone)
		c.learnDeleted(chat, del)
		c.moveLastOff(ch, del)
		w.deleteOnServer(ch, del, c)
		return nil
	})
}

// pendingDelete is a deletion TDLib wrote to its binlog for the server and
// has not sent yet: the account was offline.
type pendingDelete struct {
	chat tg.ChatID
	ids  []tg.MessageID
}

// deleteOffline is DeleteMessages while the account is offline: the
// messages the session holds (checked as TDLib does, against its own
// copies) are deleted from its database and announced at once, and the
// server's deletion waits in the database directory's binlog
// (localDB.unsent) for the connection (sendPendingDeletes). It returns
// errNeedsServer when it deleted anything, so that the request waits for
// the reconnect; run again then, it finds the ids deleted and answers.
// w.mu is held.
func (c *Client) deleteOffline(ch *chat, ids []tg.MessageID) error {
	var del []tg.MessageID
	for _, id := range ids {
		if slices.Contains(del, id) || c.knowsDeleted(ch.id, id) {
			continue
		}
		m, held := c.holds(ch, id)
		if !held {
			continue
		}
		if m != nil && !c.mayDelete(ch, m) {
			return errBadRequest("Message can't be deleted")
		}
		del = append(del, id)
	}
	if len(del) == 0 {
		return nil
	}
	c.learnDeleted(ch.id, del)
	c.moveLastOff(ch, del)
	c.db.unsent = append(c.db.unsent, pendingDelete{chat: ch.id, ids: del})
	return errNeedsServer
}

// moveLastOff moves the chat's last message, as the session shows it, off
// the messages it just deleted: TDLib takes the newest message below it
// that it holds, or none, and announces it (do_delete_message,
// updateChatLastMessage), without asking the server. The newest message
// the session learned stays as it was (localDB.shown). w.mu is held.
func (c *Client) moveLastOff(ch *chat, deleted []tg.MessageID) {
	if c.db == nil || c.w.cfg.ServerView {
		return
	}
	last := c.lastMessage(ch)
	if !slices.Contains(deleted, last) {
		return
	}
	var prev tg.MessageID
	for id := range c.db.known[ch.id] {
		if id < last && id > prev {
			prev = id
		}
	}
	c.db.shown[ch.id] = prev
	c.enqueue(tg.ChatLastMessage{Chat: ch.id, LastMessageID: prev})
}

// sendPendingDeletes sends to the server the deletions c's database
// directory holds in its binlog (deleteOffline): at the reconnect, or when
// a client opens the directory while the account is online. A message
// gone from the server meanwhile is skipped. The server refuses a whole
// deletion when the account may no longer delete one of its messages (its
// right to delete others' messages taken away meanwhile: TDLib's
// MESSAGE_DELETE_FORBIDDEN) or no longer reach the chat; TDLib then
// forgets the ids it had taken as deleted and reads the messages back
// from the server, when it still can (on_failed_message_deletion), and a
// request still waiting is answered with the refusal. w.mu is held.
func (w *World) sendPendingDeletes(c *Client) {
	if c.db == nil || len(c.db.unsent) == 0 || c.closed {
		return
	}
	unsent := c.db.unsent
	c.db.unsent = nil
	for _, p := range unsent {
		ch := w.chats[p.chat]
		if ch == nil {
			continue
		}
		readable := !ch.private && !ch.lostAccess && !c.removedFrom(ch)
		refused := !readable
		var del []*message
		for _, id := range p.ids {
			if m := ch.find(id); m != nil {
				refused = refused || !c.mayDelete(ch, m)
				del = append(del, m)
			}
		}
		if !refused {
			w.deleteOnServer(ch, idsOf(del), c)
			continue
		}
		for _, id := range p.ids {
			delete(c.deleted[ch.id], id)
		}
		if readable {
			c.remember(del...)
		}
	}
}

// idsOf returns the ids of msgs.
func idsOf(msgs []*message) []tg.MessageID {
	out := make([]tg.MessageID, len(msgs))
	for i, m := range msgs {
		out[i] = m.id
	}
	return out
}

// deleteOnServer deletes ids, which ch holds, from the server, and tells
// the other sessions that follow it (announceDeleted) and the members when
// the newest went. by, the deleting client, has already learned it.
// w.mu is held.
func (w *World) deleteOnServer(ch *chat, ids []tg.MessageID, by *Client) {
	if len(ids) == 0 {
		return
	}
	if w.deletedIn == nil {
		w.deletedIn = make(map[tg.ChatID]int)
	}
	w.deletedIn[ch.id] += len(ids)
	w.removeMessages(ch, ids, by)
}

// removeMessages takes ids, which ch holds, out of the chat, tells the
// sessions that follow it, other than by (announceDeleted), and the
// members when the newest went (lastMessageChanged). w.mu is held.
func (w *World) removeMessages(ch *chat, ids []tg.MessageID, by *Client) {
	wasLast := false
	for _, id := range ids {
		i, _ := ch.index(id)
		wasLast = wasLast || i == len(ch.msgs)-1
		ch.setDoc(ch.msgs[i], nil)
		ch.msgs = slices.Delete(ch.msgs, i, i+1)
	}
	w.announceDeleted(ch, ids, by)
	if wasLast {
		w.lastMessageChanged(ch)
	}
}

// mayDelete reports whether the account may delete m: its own message, or
// any with the right to delete others' messages in ch. w.mu is held.
func (c *Client) mayDelete(ch *chat, m *message) bool {
	return m.sender == c.account || c.w.accounts[c.account].canDelete[ch.id]
}

// holds returns message id of ch as the session holds it, in its database
// or as the chat's last message, which TDLib keeps in memory (the server's
// copy then: a sender never changes); ok is false when the session does
// not hold it. Under Config.ServerView nothing is held. w.mu is held.
func (c *Client) holds(ch *chat, id tg.MessageID) (m *message, ok bool) {
	if m, ok := c.stored(ch, id); ok {
		return m, true
	}
	if !c.w.cfg.ServerView && c.db.last[ch.id] == id {
		return ch.find(id), true
	}
	return nil, false
}

// fileReachable reports whether a message this client can read still
// carries the file with unique id uid: a chat of the account's, or a
// public channel the session resolved. A file whose every message was
// deleted (or edited to carry another document) cannot be downloaded any
// more: TDLib repairs an expired file reference from the message the file
// came from, and finds none. Called with w.mu held.
func (c *Client) fileReachable(uid string) bool {
	for _, ch := range c.w.chats {
		if ch.fileRefs[uid] == 0 || ch.private {
			continue
		}
		if ch.isMem[c.account] || c.public[ch.id] {
			return true
		}
	}
	return false
}

// announceDeleted tells the sessions whose updates ch reaches, other than
// by, that ids were deleted (updateDeleteMessages), and their databases
// forget them. An account offline learns it at its reconnect, as TDLib's
// difference brings it then. Every other session keeps its copies, and
// getMessage answers with them, until it learns of the deletion
// (Client.stored). w.mu is held.
func (w *World) announceDeleted(ch *chat, ids []tg.MessageID, by *Client) {
	if ch.private || ch.lostAccess {
		return
	}
	w.eachFollower(ch, func(cl *Client) {
		if cl != by && !cl.closed {
			cl.learnDeleted(ch.id, ids)
		}
	})
}

// Delete deletes a message, leaving a hole in the chat's server ids.
// Sessions that follow the chat receive updateDeleteMessages; the others
// go on seeing it in their databases until they learn of it
// (Client.stored). When it was the newest message, members receive
// updateChatLastMessage.
func (w *World) Delete(chat tg.ChatID, id tg.MessageID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	if _, ok := c.index(id); ok {
		w.removeMessages(c, []tg.MessageID{id}, nil)
	}
}
