package listener

import "stashd/tg"

// maxLeftBeforeWatch bounds the chats remembered as "left" before they
// are watched (TDLib announces every supergroup it learns).
const maxLeftBeforeWatch = 4096

// noteLeftLocked remembers a chat TDLib reported the account "left"
// (tg.ChatAccessLost) before it was watched: resolving a public chat the
// account never joined announces it that way, before the start-up watches
// its sources. Watch then starts the source in doubt about its access, so
// catch-up's first server read tells whether the account can read it.
func (l *Listener) noteLeftLocked(chat tg.ChatID) {
	if len(l.left) < maxLeftBeforeWatch {
		l.left[chat] = true
	}
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
