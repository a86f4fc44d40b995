package listener

import (
	"stashd/store"
	"stashd/tg"
)

// The hand-off between catch-up and the live stream: what catch-up reads
// of a source's state, and what it tells the listener it covered.

// Watermark returns the in-memory low watermark and last seen id of chat.
func (l *Listener) Watermark(chat tg.ChatID) (low, lastSeen int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.sources[chat]
	if st == nil {
		return 0, 0, false
	}
	return st.low, st.lastSeen, true
}

// LiveSeen returns the highest server id of chat this listener saw live
// (updateNewMessage, updateChatLastMessage), 0 for none. Unlike the
// lastSeen of Watermark it never comes from the store: a getChat answered
// by this session's TDLib after LiveSeen was read shows at least that id,
// unless the message was deleted.
func (l *Listener) LiveSeen(chat tg.ChatID) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.sources[chat]; st != nil {
		return st.liveSeen
	}
	return 0
}

// Low returns chat's in-memory low watermark when its state is of era
// (either era zero: any), the era of the state a scan starts from: a low
// watermark learnt before the catalogue rewound may lie past what it
// forgot.
func (l *Listener) Low(chat tg.ChatID, era store.Era) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.sources[chat]
	if st == nil || !sameEra(era, st.era) {
		return 0, false
	}
	return st.low, true
}

// sameEra reports whether a and b are the same era, or either is none.
func sameEra(a, b store.Era) bool {
	return a == (store.Era{}) || b == (store.Era{}) || a == b
}

// DropHint lowers chat's last seen id to upTo (at least its low watermark
// and what this listener saw live) when catch-up found that an id an
// earlier listener stored as seen no longer holds: the source may then be
// synced at upTo. The low watermark does not move.
func (l *Listener) DropHint(chat tg.ChatID, upTo int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.sources[chat]
	if st == nil {
		return
	}
	if v := max(upTo, st.low, st.liveSeen); v < st.lastSeen {
		st.lastSeen = v
		l.pending[chat] = struct{}{}
	}
}

// CaughtUp tells the listener that catch-up has handled every message of
// chat up to server id w. The source turns synced when w reaches the first
// id the live stream delivered since it became dirty (or, with no live event
// since, everything seen), and reports whether it did. This is the hand-off
// from catch-up to the live stream.
//
// era is the store's era of the source's state the scan started from: a
// scan of another era than the source's state here (one of them read
// before the catalogue rewound) tells nothing, and the source stays as it
// is. The zero era is any.
func (l *Listener) CaughtUp(chat tg.ChatID, era store.Era, w int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.sources[chat]
	if st == nil || !sameEra(era, st.era) {
		return false
	}
	if w > st.low {
		st.low = w
		for id := range st.done {
			if id <= w {
				delete(st.done, id)
			}
		}
	}
	if !st.dirty {
		l.advanceLocked(st)
		return true
	}
	if st.lostMarks > st.readMark { // a loss not disproved: the next scan checks
		l.lagLocked(st)
		return false
	}
	if (st.firstLive != 0 && w >= st.firstLive-1) || (st.firstLive == 0 && w >= st.lastSeen) {
		st.dirty = false
		st.reason = ""
		st.firstLive = 0
		st.lastSeen = max(st.lastSeen, w)
		if l.m != nil {
			l.m.dirty.WithLabelValues(st.label).Set(0)
		}
		l.pending[chat] = struct{}{}
		l.wakeLocked()
		l.advanceLocked(st)
		return true
	}
	l.lagLocked(st)
	return false
}

// Behind returns the sources whose state was read in an era before now
// (the store's current one): the catalogue rewound since, and their state
// must be read again from it (Watch) before anything of theirs is written.
func (l *Listener) Behind(now store.Era) []tg.ChatID {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []tg.ChatID
	for chat, st := range l.sources {
		if st.era != (store.Era{}) && st.era != now {
			out = append(out, chat)
		}
	}
	return out
}
