package tdlib

import (
	"sync"

	"stashd/tg"
)

// updateQueue is the unbounded FIFO between the update pump and the consumer
// of Updates(). push never blocks, so the pump never blocks, and neither
// does go-tdlib's receiver behind it: a stalled consumer costs memory, not
// every pending request's response. It is bounded in practice by the
// consumer, tg.Session, which drains continuously.
type updateQueue struct {
	mu    sync.Mutex
	items []tg.Update
	// ready holds a token when items may be non-empty (capacity 1, so a
	// push never waits for the forwarder).
	ready chan struct{}
}

func newUpdateQueue() *updateQueue {
	return &updateQueue{ready: make(chan struct{}, 1)}
}

// push appends u and returns the queue's new length.
func (q *updateQueue) push(u tg.Update) int {
	q.mu.Lock()
	q.items = append(q.items, u)
	n := len(q.items)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return n
}

// take removes and returns everything queued, oldest first.
func (q *updateQueue) take() []tg.Update {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.items
	q.items = nil
	return batch
}

func (q *updateQueue) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) == 0
}

// forward delivers the queued updates to out, in order, and closes out when
// it returns: when stop is closed (what is still queued is dropped), or when
// end is closed, meaning no more pushes come, and everything queued has been
// delivered.
func (q *updateQueue) forward(out chan<- tg.Update, end, stop <-chan struct{}) {
	defer close(out)
	for {
		batch := q.take()
		for _, u := range batch {
			select {
			case out <- u:
			case <-stop:
				return
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-q.ready:
		case <-end:
			// Every push happened before end was closed, so an empty queue
			// now stays empty.
			if q.empty() {
				return
			}
		case <-stop:
			return
		}
	}
}
