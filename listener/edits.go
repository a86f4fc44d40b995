package listener

import (
	"context"
	"time"

	"stashd/store"
	"stashd/tg"
)

// An edit that changes a message's content (updateMessageContent: a text
// turned into a document, a document replaced) comes once, and usually
// below the watermark: the message was handled before. Its re-fetch waits
// in the queue, in memory, so the listener notes it in the store
// (store.NoteEdits) and forgets the note once a worker reports the
// re-fetch handled (Done). A stop that leaves the re-fetch queued or in a
// worker's hands (a crash, a drain cut short) leaves the note, and the
// next start queues it again: catch-up pages above the watermark only, and
// the rescan's window counts from the messages' dates.

// maxEdits bounds the edits followed at once; an edit beyond it is
// queued without a note, left to the rescan if a stop loses it.
const maxEdits = 4096

// edit is the state of one message's changed content.
type edit struct {
	// seq is the latest note's order (nextEditSeqLocked).
	seq int64
	// noted: the note of seq is written; onDisk: a note of the message
	// is (seq's or an earlier one).
	noted, onDisk bool
	// queued: a re-fetch of it is queued or in a worker's hands.
	queued bool
	// done: the re-fetch of seq was handled; the note is to be forgotten.
	done bool
	// parked: its re-fetch was abandoned; the note waits for the next
	// start rather than being queued again at once.
	parked bool
}

// nextEditSeqLocked returns a note order above every earlier one, also
// those a previous process of the account wrote (the wall clock's
// nanoseconds).
func (l *Listener) nextEditSeqLocked() int64 {
	l.editSeq = max(l.editSeq+1, time.Now().UnixNano())
	return l.editSeq
}

// contentChangedLocked queues a re-fetch of a changed message of a watched
// source, noted with the next flush.
func (l *Listener) contentChangedLocked(key tg.MessageKey, now time.Time) {
	e := l.edits[key]
	if e == nil {
		if len(l.edits) >= maxEdits {
			if !l.enqueueLocked(Item{Message: tg.Message{ChatID: key.Chat, ID: key.Message}, Refetch: true, Queued: now}) {
				l.overflowLocked(key.Chat, "content change left to the rescan")
			}
			return
		}
		e = &edit{}
		l.edits[key] = e
	}
	e.seq, e.noted, e.done, e.parked = l.nextEditSeqLocked(), false, false, false
	// A re-fetch queued already may have read the message before this
	// change: its report (editDoneLocked) queues it again.
	if !e.queued {
		l.queueEditLocked(key, e, now)
	}
	l.wakeLocked()
}

func (l *Listener) queueEditLocked(key tg.MessageKey, e *edit, now time.Time) bool {
	if l.closed {
		return false
	}
	if !l.enqueueLocked(Item{Message: tg.Message{ChatID: key.Chat, ID: key.Message}, Refetch: true, Edit: e.seq, Queued: now}) {
		l.overflowLocked(key.Chat, "content change noted; its fetch is queued when the queue has room")
		return false
	}
	e.queued = true
	return true
}

// editDoneLocked takes a worker's report of a re-fetch: handled (settled)
// or abandoned.
func (l *Listener) editDoneLocked(item Item, settled bool) {
	e := l.edits[item.Message.Key()]
	if item.Edit == 0 || e == nil {
		return
	}
	e.queued = false
	switch {
	case item.Edit < e.seq:
		// Changed again since it was queued: fetched again.
	case settled:
		e.done = true
	default:
		e.parked = true
	}
	l.wakeLocked()
}

// flushEdits writes the notes of new edits, forgets those handled, reads
// the notes an earlier process left (at the first flush), and queues the
// re-fetches that found no room before.
func (l *Listener) flushEdits(ctx context.Context) {
	l.mu.Lock()
	var note, forget []store.PendingEdit
	for k, e := range l.edits {
		switch {
		case e.done && !e.onDisk:
			delete(l.edits, k) // handled before its note was written
		case e.done:
			forget = append(forget, store.PendingEdit{Key: k, Seq: e.seq})
		case !e.noted:
			note = append(note, store.PendingEdit{Key: k, Seq: e.seq})
		}
	}
	load := l.editsOnDisk && len(l.edits) < maxEdits/2
	room := maxEdits - len(l.edits)
	var watched []tg.ChatID
	if load {
		watched = make([]tg.ChatID, 0, len(l.sources))
		for chat := range l.sources {
			watched = append(watched, chat)
		}
	}
	l.mu.Unlock()

	if err := l.store.NoteEdits(ctx, l.cfg.Account, note); err != nil {
		if ctx.Err() == nil {
			l.log.Warn("note changed messages", "err", err)
		}
	} else {
		l.mu.Lock()
		for _, n := range note {
			if e := l.edits[n.Key]; e != nil {
				e.onDisk = true
				e.noted = e.noted || e.seq == n.Seq
			}
		}
		l.mu.Unlock()
	}
	if err := l.store.ForgetEdits(ctx, forget); err != nil {
		if ctx.Err() == nil {
			l.log.Warn("forget changed messages handled", "err", err)
		}
	} else {
		l.mu.Lock()
		for _, f := range forget {
			if e := l.edits[f.Key]; e != nil && e.done && e.seq == f.Seq {
				delete(l.edits, f.Key)
			}
		}
		l.mu.Unlock()
	}
	var loaded []store.PendingEdit
	if load {
		var err error
		if loaded, err = l.store.PendingEdits(ctx, watched, room); err != nil {
			load = false
			if ctx.Err() == nil {
				l.log.Warn("read changed messages noted before", "err", err)
			}
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if load {
		added := 0
		for _, n := range loaded {
			if l.sources[n.Key.Chat] == nil || l.edits[n.Key] != nil {
				continue
			}
			l.edits[n.Key] = &edit{seq: n.Seq, noted: true, onDisk: true}
			l.editSeq = max(l.editSeq, n.Seq)
			added++
		}
		// A full page may hide more: read again once these are handled.
		l.editsOnDisk = len(loaded) == room && added > 0
		if added > 0 {
			l.log.Info("changed messages a stop left unfetched are fetched again", "messages", added)
		}
	}
	now := l.cfg.Now()
	for k, e := range l.edits {
		if !e.queued && !e.done && !e.parked && !l.queueEditLocked(k, e, now) {
			break
		}
	}
}
