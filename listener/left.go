package listener

import "stashd/tg"

// maxLeftBeforeWatch bounds the chats remembered as "left" before they
// are watched (TDLib announces every supergroup and basic group it learns).
const maxLeftBeforeWatch = 4096

// noteLeftLocked remembers a chat TDLib reported the account "left"
// (tg.ChatAccessLost) before it was watched: resolving a public chat the
// account never joined announces it that way, before the start-up watches
// its sources. Watch then starts the source in doubt about its access, so
// catch-up's first server read tells whether the account can read it.
func (l *Listener) noteLeftLocked(chat tg.ChatID) {
	delete(l.joined, chat)
	if len(l.left) < maxLeftBeforeWatch {
		l.left[chat] = true
	}
}

// noteHeldLocked remembers a chat TDLib reported the account a member of
// (tg.ChatAccessHeld) before it was watched, as TDLib does for each
// supergroup and basic group it loads at the start: Watch then offers the source to
// TakeRejoined, in case the catalogue recorded it inaccessible.
func (l *Listener) noteHeldLocked(chat tg.ChatID) {
	delete(l.left, chat)
	if len(l.joined) < maxLeftBeforeWatch {
		l.joined[chat] = true
	}
}

// heldLocked takes TDLib's report that the account is a member of st's
// chat: access lost before is back, and a source whose scans failed for
// want of it need not wait for its circuit (TakeRejoined). A source in
// doubt is dirty already; catch-up is woken to take it.
func (l *Listener) heldLocked(st *source) {
	st.member, st.rejoined = true, true
	if st.dirty {
		select {
		case l.dirtyWake <- struct{}{}:
		default:
		}
	}
}

// TakeRejoined returns the sources TDLib reported the account a member of
// since the last call (tg.ChatAccessHeld), and forgets them. Catch-up
// reads those the catalogue recorded inaccessible at once, rather than
// when their circuit closes: one server read each, taken once per report.
func (l *Listener) TakeRejoined() []tg.ChatID {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []tg.ChatID
	for chat, st := range l.sources {
		if st.rejoined {
			st.rejoined = false
			out = append(out, chat)
		}
	}
	return out
}

// MemberSinceLoss reports whether TDLib reported the account a member of
// chat after the last loss it reported: a scan that then reads the chat
// shows a member's access, not a public chat read from outside. A fetch
// refused meanwhile (MarkDirty with ReasonAccessLost) puts the access in
// doubt but is no status of TDLib's: its letter may be recorded after the
// report of the account's return.
func (l *Listener) MemberSinceLoss(chat tg.ChatID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.sources[chat]
	return st != nil && st.member
}

// startReasonLocked is why a newly watched source starts dirty: the start,
// or a "left" status seen before it was watched.
func (l *Listener) startReasonLocked(chat tg.ChatID) string {
	if l.left[chat] {
		delete(l.left, chat)
		return ReasonAccessLost
	}
	return ReasonStart
}

// watchReasonLocked is why st, about to be watched, starts dirty. A
// source watched again (its state read anew after the catalogue rewound)
// keeps what TDLib told this session of the account's access, which is no
// catalogue state: a loss no server call disproved yet stays in doubt, and
// is the reason.
func (l *Listener) watchReasonLocked(st *source) string {
	reason := l.startReasonLocked(st.chat)
	old := l.sources[st.chat]
	if old == nil {
		return reason
	}
	st.lostMarks, st.readMark, st.member, st.rejoined = old.lostMarks, old.readMark, old.member, old.rejoined
	if st.lostMarks > st.readMark {
		// markDirtyLocked counts a loss for this reason: the one kept
		// is not another.
		st.lostMarks--
		return ReasonAccessLost
	}
	return reason
}

// AccessInDoubt reports whether the account was said to have lost chat
// (ChatAccessLost, a download refused for it) since a server call last
// read it: getChat still answers from local state, so only a server call
// can tell. A loss reported while a scan was under way is not covered by
// that scan's success: the source stays dirty until the next one.
func (l *Listener) AccessInDoubt(chat tg.ChatID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.sources[chat]
	return st != nil && st.lostMarks > st.readMark
}

// AccessMark returns the count of losses of chat reported so far, for
// AccessRead.
func (l *Listener) AccessMark(chat tg.ChatID) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.sources[chat]; st != nil {
		return st.lostMarks
	}
	return 0
}

// AccessRead records that a server call made after AccessMark returned
// mark read chat: the losses reported up to mark are disproved. Those
// reported since stay in doubt.
func (l *Listener) AccessRead(chat tg.ChatID, mark uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.sources[chat]; st != nil {
		st.readMark = max(st.readMark, mark)
	}
}
