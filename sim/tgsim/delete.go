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
// as the session knows it) is skipped, and the message stays in the chat. An
// id the session holds that the server deleted since is dropped from its
// database and announced to it (MessagesDeleted). Under Config.ServerView
// every id is looked up on the server, and one that does not exist is
// skipped. Deleted messages leave the chat's history, search and
// World.Messages for good, for every member whatever revoke says (the
// simulator models channels and supergroups, where a deletion is always for
// everyone). The client, and every client that opened the chat, receives
// MessagesDeleted for them; members receive updateChatLastMessage when the
// newest message went. World.Calls counts the request. While the account
// is offline a deletion that asks the server waits for the reconnect.
func (c *Client) DeleteMessages(ctx context.Context, chat tg.ChatID, ids []tg.MessageID, revoke bool) error {
	return call0(ctx, c, tg.MethodDeleteMessages, func() error {
		w := c.w
		ch, err := c.serverChat(chat)
		if err != nil {
			return err
		}
		a := w.accounts[c.account]
		// A failed local message (see failSend) is deleted from this
		// session's view only.
		local, ids := c.deleteFailed(chat, ids)
		if len(local) > 0 {
			c.enqueue(tg.MessagesDeleted{Chat: chat, IDs: local, IsPermanent: true})
		}
		var del, gone []tg.MessageID
		for _, id := range ids {
			if id <= 0 {
				return errBadRequest("Invalid message identifier")
			}
		}
		for _, id := range ids {
			_, held := c.stored(ch, id)
			held = held || !w.cfg.ServerView && c.db.last[chat] == id // TDLib keeps a chat's last message
			if slices.Contains(del, id) || slices.Contains(gone, id) || !held && !w.cfg.ServerView {
				continue
			}
			// Asked of the server: the query waits for TDLib's connection.
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
			if m.sender != c.account && !a.canDelete[chat] {
				return errBadRequest("Message can't be deleted")
			}
			del = append(del, id)
		}
		// A message the session held but the server deleted since: TDLib
		// deletes it from its database too, and says so.
		c.learnDeleted(chat, gone)
		if len(del) == 0 {
			return nil
		}
		wasLast := false
		for _, id := range del {
			i, _ := ch.index(id)
			wasLast = wasLast || i == len(ch.msgs)-1
			ch.setDoc(ch.msgs[i], nil)
			ch.msgs = slices.Delete(ch.msgs, i, i+1)
		}
		if w.deletedIn == nil {
			w.deletedIn = make(map[tg.ChatID]int)
		}
		w.deletedIn[chat] += len(del)
		c.learnDeleted(chat, del)
		w.announceDeleted(ch, del, c)
		if wasLast {
			w.lastMessageChanged(ch)
		}
		return nil
	})
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
	i, ok := c.index(id)
	if !ok {
		return
	}
	wasLast := i == len(c.msgs)-1
	c.setDoc(c.msgs[i], nil)
	c.msgs = slices.Delete(c.msgs, i, i+1)
	w.announceDeleted(c, []tg.MessageID{id}, nil)
	if wasLast {
		w.lastMessageChanged(c)
	}
}
