package ingest

import (
	"slices"
	"sync"
	"time"

	"stashd/store"
	"stashd/tg"
)

// maxLateSends bounds the tokens a LateSends watches at once.
const maxLateSends = 10_000

// LateSends names the delivery tokens of the intents this account took
// over from an account away (store.TakeWaiting), for a while after the
// take. A send of that account may have been on its way when its session
// closed (a remote logout, a lost lease): its message lands a little
// later, possibly after this account read the destination for the token,
// found nothing and sent the part itself. The away account's session no
// longer reports it, so nothing would settle it; this account's session is
// told of it as of any new post in a channel it opened (updateNewMessage),
// and Claims hands such a message to the SendRecorder, which records it
// or deletes it as a second copy (RecordSend). Only the tokens taken are
// looked for, in memory: no other post costs a look in the catalogue. The
// database keeps them too (store.TakeWaiting), and a new run of the
// account watches again those whose window has not passed
// (store.LateSendsWatched).
// The zero value is not usable; NewLateSends makes one. It is safe for
// concurrent use (Claims runs on the session's pump).
type LateSends struct {
	mu sync.Mutex
	// byToken holds each token watched: where its message may land, who
	// may have sent it, and until when it is watched.
	byToken map[string]lateSend
	// dests counts the tokens watched by destination: a post elsewhere is
	// passed over without reading its caption.
	dests map[tg.ChatID]int
}

// maxClaimedPerToken bounds the messages remembered as claimed for one
// token: the late send is one message, and another account's send of the
// same part (handed on) may be told of too.
const maxClaimedPerToken = 4

// lateSend is one token LateSends watches.
type lateSend struct {
	dest    tg.ChatID
	account string
	until   time.Time
	// claimed holds the messages Claims claimed for the token: only those
	// are the away account's sends. This account's own sends carry the
	// token too, and one no waiter claimed is its own.
	claimed []tg.MessageID
}

// NewLateSends returns a LateSends watching nothing.
func NewLateSends() *LateSends {
	return &LateSends{byToken: map[string]lateSend{}, dests: map[tg.ChatID]int{}}
}

// Watch watches the tokens of intents, each for its Left from now, and
// forgets those whose window has passed. Beyond maxLateSends tokens the
// new ones are not watched, and Watch returns how many it left out.
func (l *LateSends) Watch(intents ...store.TakenIntent) (left int) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for tok, ls := range l.byToken {
		if !now.Before(ls.until) {
			l.forget(tok, ls)
		}
	}
	for _, in := range intents {
		if _, ok := l.byToken[in.Token]; !ok && len(l.byToken) >= maxLateSends {
			left++
			continue
		}
		if old, ok := l.byToken[in.Token]; ok {
			l.forget(in.Token, old)
		}
		l.byToken[in.Token] = lateSend{dest: in.Destination, account: in.Account, until: now.Add(in.Left)}
		l.dests[in.Destination]++
	}
	return left
}

// forget drops tok; l.mu is held.
func (l *LateSends) forget(tok string, ls lateSend) {
	delete(l.byToken, tok)
	if l.dests[ls.dest]--; l.dests[ls.dest] <= 0 {
		delete(l.dests, ls.dest)
	}
}

// Claims reports whether m, a new message this session was told of, is
// the landing of a send taken over: a server message in the destination
// of a token watched, carrying it, within its window. A nil LateSends
// claims nothing.
func (l *LateSends) Claims(m tg.Message) bool {
	if l == nil || !m.ID.IsServer() || m.Document == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dests[m.ChatID] == 0 {
		return false
	}
	tok := TokenOf(m.Caption)
	ls, ok := l.byToken[tok]
	switch {
	case !ok || ls.dest != m.ChatID:
		return false
	case !time.Now().Before(ls.until):
		l.forget(tok, ls)
		return false
	}
	if !slices.Contains(ls.claimed, m.ID) && len(ls.claimed) < maxClaimedPerToken {
		ls.claimed = append(ls.claimed, m.ID)
		l.byToken[tok] = ls
	}
	return true
}

// senderOf returns the account that may have sent message id of dest,
// carrying token, when Claims claimed it as a send taken over; ok is false
// otherwise (this account's own send carrying the token among them).
func (l *LateSends) senderOf(token string, dest tg.ChatID, id tg.MessageID) (string, bool) {
	if l == nil {
		return "", false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.byToken[token]
	if !ok || ls.dest != dest || !slices.Contains(ls.claimed, id) {
		return "", false
	}
	return ls.account, true
}
