package tg

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Readers that need a chat open at once share one openChat; a failed open
// is asked again by the next reader.
func TestViewsOpenOnceForConcurrentReaders(t *testing.T) {
	var opens atomic.Int32
	release := make(chan struct{})
	fail := true
	v := NewViews(func(ctx context.Context, chat ChatID) error {
		opens.Add(1)
		<-release
		if fail {
			return errors.New("open failed")
		}
		return nil
	}, time.Millisecond)
	ctx := t.Context()

	close(release)
	if _, err := v.Open(ctx, 1); err == nil {
		t.Fatal("failed open reported no error")
	}
	fail = false
	release = make(chan struct{})
	var wg sync.WaitGroup
	ats := make([]time.Time, 8)
	for i := range ats {
		wg.Go(func() {
			at, err := v.Open(ctx, 1)
			if err != nil {
				t.Error(err)
			}
			ats[i] = at
		})
	}
	for opens.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the other readers are waiting
	close(release)
	wg.Wait()
	if got := opens.Load(); got != 2 {
		t.Errorf("%d opens; want the failed one and one shared by 8 readers", got)
	}
	for _, at := range ats {
		if !at.Equal(ats[0]) {
			t.Errorf("readers saw opens at %v and %v", ats[0], at)
		}
	}
}

// TDLib answers openChat without opening a chat the account is out of: a
// chat opened while out of it, or opened before it was lost, is opened
// again once the account is back. A member report with no loss before it
// (each load's) asks nothing again.
func TestViewsOpenAgainAfterAccessCameBack(t *testing.T) {
	var opens atomic.Int32
	v := NewViews(func(ctx context.Context, chat ChatID) error {
		opens.Add(1)
		return nil
	}, time.Millisecond)
	ctx := t.Context()
	open := func(want int32, what string) {
		t.Helper()
		if _, err := v.Open(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if n := opens.Load(); n != want {
			t.Fatalf("%s: %d opens, want %d", what, n, want)
		}
	}
	open(1, "first open")
	v.AccessHeld(1)
	open(1, "after a member report with no loss")
	v.AccessLost(1)
	open(2, "while out of the chat")
	open(2, "again while out of it")
	v.AccessHeld(1)
	open(3, "back in the chat")
	open(3, "again once back")
}

// An open that a loss and a return of the account's access came during
// may have been made while out of the chat: it is asked again.
func TestViewsOpenDuringAccessReportsIsAskedAgain(t *testing.T) {
	var opens atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	v := NewViews(func(ctx context.Context, chat ChatID) error {
		if opens.Add(1) == 1 {
			close(started)
			<-release
		}
		return nil
	}, time.Millisecond)
	ctx := t.Context()
	done := make(chan error)
	go func() {
		_, err := v.Open(ctx, 1)
		done <- err
	}()
	<-started
	v.AccessLost(1)
	v.AccessHeld(1)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := v.Open(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := opens.Load(); n != 2 {
		t.Errorf("%d opens, want 2: the one a loss and a return came during, asked again", n)
	}
}

// While the session is away, its database learns nothing of what others
// post: a read waits for the connection's return. Back to ready, a chat
// opened long ago is not current until settle has passed again: its
// difference for the outage is on its way. Reads made before the
// outage's end are stale too.
func TestViewsSettleAgainAfterAReconnect(t *testing.T) {
	const settle = 50 * time.Millisecond
	v := NewViews(func(ctx context.Context, chat ChatID) error { return nil }, settle)
	ctx := t.Context()
	v.Connection(ConnReady)
	if err := v.Current(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if stale, err := v.StaleAt(ctx, 1, time.Now()); err != nil || stale {
		t.Fatalf("StaleAt once settled = %v, %v; want current", stale, err)
	}
	v.Connection(ConnConnecting)
	v.Connection(ConnUpdating)
	before := time.Now()
	type answer struct {
		stale bool
		err   error
		at    time.Time
	}
	during := make(chan answer, 1)
	go func() {
		stale, err := v.StaleAt(ctx, 1, before)
		during <- answer{stale, err, time.Now()}
	}()
	select {
	case a := <-during:
		t.Fatalf("StaleAt while the connection is away returned %+v, want it to wait for the return", a)
	case <-time.After(4 * settle):
	}
	short, cancel := context.WithTimeout(ctx, settle)
	defer cancel()
	if err := v.Current(short, 2); err == nil {
		t.Fatal("Current of a chat never opened returned while the connection is away, want it to wait")
	}
	v.Connection(ConnReady)
	start := time.Now()
	if a := <-during; a.err != nil || !a.stale {
		t.Fatalf("StaleAt of a read made while away = %v, %v; want stale", a.stale, a.err)
	} else if waited := a.at.Sub(start); waited < settle*4/5 {
		t.Errorf("StaleAt returned %s after the reconnect, want it to wait about %s for the view", waited, settle)
	}
	start = time.Now()
	stale, err := v.StaleAt(ctx, 1, before)
	if err != nil || !stale {
		t.Fatalf("StaleAt of a read made before the reconnect = %v, %v; want stale", stale, err)
	}
	if waited := time.Since(start); waited > settle {
		t.Errorf("StaleAt of a view settled since the reconnect waited %s", waited)
	}
	v.Connection(ConnReady) // a repeated report is no new reconnect
	if stale, _ := v.StaleAt(ctx, 1, time.Now()); stale {
		t.Error("a second ready report made the view stale again")
	}
}
