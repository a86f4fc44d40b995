package tg

import (
	"context"
	"sync"
	"time"

	"stashd/internal/service"
)

// DefaultViewSettle is how long after opening a channel a session's view
// of it is taken as current (Views).
const DefaultViewSettle = 2 * time.Second

// Views brings one session's view of chats up to date before their
// history is read from the end. TDLib answers getChat's last message and
// getChatHistory from the end out of the session's own database, and it
// hides a channel's messages newer than the last one it learned through
// updates (MessagesManager::add_message_to_dialog ignores a "too new
// message not from update"): a session that did not follow a chat while
// another session (another instance, another account) posted there
// reads the chat as it last knew it. Opening the chat makes TDLib fetch
// its difference (MessagesManager::open_dialog, get_channel_difference),
// asynchronously and with no answer of its own, and then follow the chat
// through updates while the session lasts. So a chat is opened once per
// session, and a read waits until settle has passed since it was opened:
// the difference's round trip. One slower than that (a FLOOD_WAIT on the
// difference itself) leaves the read as stale as it was without Views.
type Views struct {
	open    func(ctx context.Context, chat ChatID) error
	settle  time.Duration
	mu      sync.Mutex
	opened  map[ChatID]time.Time
	opening map[ChatID]chan struct{} // closed when the open under way ends
	// lost holds the chats TDLib reported the account out of
	// (AccessLost) and not back yet; reports counts the losses and
	// returns reported of each chat, so that an open one came during is
	// not trusted.
	lost    map[ChatID]bool
	reports map[ChatID]int
	// away is open while the session last reported itself not connected
	// (closed at its return to ready), nil while it is ready or has not
	// reported its state yet.
	away chan struct{}
}

// NewViews returns the views of the session that open opens chats in;
// settle zero means DefaultViewSettle.
func NewViews(open func(ctx context.Context, chat ChatID) error, settle time.Duration) *Views {
	if settle <= 0 {
		settle = DefaultViewSettle
	}
	return &Views{open: open, settle: settle, opened: make(map[ChatID]time.Time), opening: make(map[ChatID]chan struct{}),
		lost: make(map[ChatID]bool), reports: make(map[ChatID]int)}
}

// AccessLost notes that TDLib reported the account out of chat
// (ChatAccessLost). TDLib answers openChat without opening a chat the
// account cannot read (MessagesManager::open_dialog needs an input peer to
// read it), so an open made while out of it opens nothing.
func (v *Views) AccessLost(chat ChatID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lost[chat] = true
	v.reports[chat]++
	delete(v.opened, chat)
}

// AccessHeld notes that TDLib reported the account a member of chat
// (ChatAccessHeld). Back after a loss, chat is not open, whatever was
// asked meanwhile: the next Open opens it again.
func (v *Views) AccessHeld(chat ChatID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.lost[chat] {
		v.reports[chat]++
		delete(v.lost, chat)
		delete(v.opened, chat)
	}
}

// Connection notes the session's connection state (updateConnectionState).
// While the session is away TDLib still answers reads from its database,
// which learns nothing of what others post: Current waits for its return.
// Back to ready, the session fetches what changed in the channels it
// follows while it was away, each channel's difference on its own, after
// the account's common difference that the updating state covers: every
// chat opened counts as opened now, and a read waits settle again before
// it trusts the session's view.
func (v *Views) Connection(state ConnectionState) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch ready := state == ConnReady; {
	case !ready && v.away == nil:
		v.away = make(chan struct{})
	case ready && v.away != nil:
		now := time.Now()
		for chat := range v.opened {
			v.opened[chat] = now
		}
		close(v.away)
		v.away = nil
	}
}

// Open opens chat unless this session opened it already, and returns when
// it was opened. Callers that come while it is being opened wait for that
// open rather than asking again. A failed open is returned and tried again
// by the next call.
func (v *Views) Open(ctx context.Context, chat ChatID) (time.Time, error) {
	for {
		v.mu.Lock()
		if at, ok := v.opened[chat]; ok {
			v.mu.Unlock()
			return at, nil
		}
		busy := v.opening[chat]
		if busy == nil {
			break // v.mu held: this caller opens chat
		}
		v.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
	done := make(chan struct{})
	v.opening[chat] = done
	reports := v.reports[chat]
	v.mu.Unlock()
	err := v.open(ctx, chat)
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.opening, chat)
	close(done)
	if err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	// An open that a loss or a return of the account's access came
	// during may have been made while out of chat, opening nothing: it
	// is not recorded, and the next Open asks again.
	if v.reports[chat] == reports {
		v.opened[chat] = at
	}
	return at, nil
}

// StaleAt is Current, and reports whether chat's view was not current yet
// at t: it was not open, or opened less than settle before t. A read made
// at t may then have missed what the difference brings: a channel message
// TDLib still hides as newer than the last one the session learned, which
// getMessage answers with a 404 (Views).
func (v *Views) StaleAt(ctx context.Context, chat ChatID, t time.Time) (bool, error) {
	v.mu.Lock()
	before, ok := v.opened[chat]
	v.mu.Unlock()
	// The opening Current waited for: later than before when it waited
	// out an outage, which counts every chat as opened again.
	at, err := v.current(ctx, chat)
	if err != nil {
		at = before
	}
	return !ok || t.Before(at.Add(v.settle)), err
}

// Current waits while the session is away (Connection), opens chat
// (Open) and returns once settle has passed since it was opened (at once
// for a chat opened long ago), or when ctx ends. Chats opened together
// are waited for together.
func (v *Views) Current(ctx context.Context, chat ChatID) error {
	_, err := v.current(ctx, chat)
	return err
}

// current is Current, and returns when chat was opened, as the wait
// counted it.
func (v *Views) current(ctx context.Context, chat ChatID) (time.Time, error) {
	v.mu.Lock()
	away := v.away
	v.mu.Unlock()
	if away != nil {
		select {
		case <-away:
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
	at, err := v.Open(ctx, chat)
	if err != nil {
		return time.Time{}, err
	}
	wait := time.Until(at.Add(v.settle))
	if wait > 0 && !service.Sleep(ctx, wait) {
		return at, ctx.Err()
	}
	return at, nil
}
