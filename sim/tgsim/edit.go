package tgsim

import (
	"fmt"

	"stashd/tg"
)

// MediaEdit is one document replaced by editMessageMedia: the message
// that carried OldUniqueID carries NewUniqueID from then on.
type MediaEdit struct {
	Chat        tg.ChatID
	Message     tg.MessageID
	OldUniqueID string
	NewUniqueID string
}

// EditMessageMedia replaces the document of an existing message, as a
// channel administrator's editMessageMedia does: the message keeps its id
// and date, carries the post's document and caption from then on, and its
// old file is no longer reachable through it (a download that needs the
// message fails once no live message carries the file). Like Telegram,
// sessions that receive the chat's messages get updateMessageContent and
// updateMessageEdited; nothing else announces the change, so a session
// that was not listening sees it only by reading the message again.
func (w *World) EditMessageMedia(chat tg.ChatID, id tg.MessageID, p Post) MediaEdit {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	m := c.find(id)
	if m == nil {
		panic(fmt.Sprintf("tgsim: EditMessageMedia: chat %d has no message %d", chat, id))
	}
	if m.doc == nil {
		panic(fmt.Sprintf("tgsim: EditMessageMedia: message %d of chat %d has no document", id, chat))
	}
	doc := w.docFor(p)
	if doc == nil {
		panic("tgsim: EditMessageMedia: the post has no document")
	}
	e := MediaEdit{Chat: chat, Message: id, OldUniqueID: m.doc.uid, NewUniqueID: doc.uid}
	at := w.now() // in seconds, as Telegram's edit_date: two edits may share one
	c.setDoc(m, doc)
	m.caption, m.edited = p.Caption, at
	w.mediaEdits = append(w.mediaEdits, e)
	if c.private || c.lostAccess {
		return e
	}
	w.eachListener(c, func(cl *Client) {
		if cl.receivesMessages(c) {
			cl.relearn(m)
			cl.enqueue(tg.MessageContentChanged{Chat: c.id, Message: id})
			cl.enqueue(tg.MessageEdited{Chat: c.id, Message: id, EditDate: at})
		}
	})
	return e
}

// MediaEdits returns every document replaced so far, oldest first.
func (w *World) MediaEdits() []MediaEdit {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]MediaEdit(nil), w.mediaEdits...)
}

// eachListener calls fn for every live client that may hear about c: the
// clients of c's members, and those of non-members that opened c (a
// public channel read without joining it).
func (w *World) eachListener(c *chat, fn func(*Client)) {
	w.eachClient(c, fn)
	w.eachOpenedNonMember(c, fn)
}

// eachOpenedNonMember calls fn for every live, connected client of an
// account that is not a member of c but resolved c by its public name and
// opened it: TDLib keeps such a channel's updates coming while it is open.
func (w *World) eachOpenedNonMember(c *chat, fn func(*Client)) {
	for _, a := range w.accounts {
		if c.isMem[a.name] || a.offline {
			continue
		}
		for _, cl := range a.clients {
			if cl.public[c.id] && cl.opened[c.id] {
				fn(cl)
			}
		}
	}
}
