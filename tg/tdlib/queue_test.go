package tdlib

import (
	"testing"

	"stashd/tg"
)

func TestUpdateQueuePushNeverBlocks(t *testing.T) {
	t.Parallel()
	q := newUpdateQueue()
	// Far more than any channel buffer, with nobody reading.
	const n = 100_000
	for i := range n {
		if got := q.push(tg.ChatLastMessage{LastMessageID: tg.MessageID(i)}); got != i+1 {
			t.Fatalf("length %d after %d pushes", got, i+1)
		}
	}
	out := make(chan tg.Update)
	end := make(chan struct{})
	close(end)
	go q.forward(out, end, make(chan struct{}))
	i := 0
	for u := range out {
		if got := u.(tg.ChatLastMessage).LastMessageID; got != tg.MessageID(i) {
			t.Fatalf("update %d carries %d: order lost", i, got)
		}
		i++
	}
	if i != n {
		t.Fatalf("delivered %d of %d", i, n)
	}
}

func TestUpdateQueueForwardsWhilePushing(t *testing.T) {
	t.Parallel()
	q := newUpdateQueue()
	out := make(chan tg.Update)
	end := make(chan struct{})
	go q.forward(out, end, make(chan struct{}))
	const n = 1000
	go func() {
		for i := range n {
			q.push(tg.ChatLastMessage{LastMessageID: tg.MessageID(i)})
		}
		close(end)
	}()
	i := 0
	for u := range out {
		if got := u.(tg.ChatLastMessage).LastMessageID; got != tg.MessageID(i) {
			t.Fatalf("update %d carries %d", i, got)
		}
		i++
	}
	if i != n {
		t.Fatalf("delivered %d of %d before out closed", i, n)
	}
}

func TestUpdateQueueStopDrops(t *testing.T) {
	t.Parallel()
	q := newUpdateQueue()
	q.push(tg.ConnectionStateChanged{State: tg.ConnReady})
	q.push(tg.ConnectionStateChanged{State: tg.ConnUpdating})
	out := make(chan tg.Update)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.forward(out, make(chan struct{}), stop)
	}()
	if u := <-out; u != (tg.ConnectionStateChanged{State: tg.ConnReady}) {
		t.Fatalf("first update %v", u)
	}
	// The consumer has stopped reading; stop must still end the forwarder.
	close(stop)
	<-done
	if _, ok := <-out; ok {
		t.Error("out delivered after stop instead of being closed")
	}
}
