// Package fifo is an unbounded first-in, first-out queue whose Push never
// blocks: a producer that must not wait (a session's update pump) hands
// its items to a consumer that drains them in batches. A stalled consumer
// costs memory, not the producer.
package fifo

import "sync"

// Queue is an unbounded FIFO of T; its zero value is not usable (New).
type Queue[T any] struct {
	mu    sync.Mutex
	items []T
	// ready holds a token when items may be non-empty (capacity 1, so a
	// push never waits for the consumer).
	ready chan struct{}
}

// New returns an empty queue.
func New[T any]() *Queue[T] {
	return &Queue[T]{ready: make(chan struct{}, 1)}
}

// Push appends v and returns the queue's new length.
func (q *Queue[T]) Push(v T) int {
	q.mu.Lock()
	q.items = append(q.items, v)
	n := len(q.items)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return n
}

// Take removes and returns everything queued, oldest first.
func (q *Queue[T]) Take() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.items
	q.items = nil
	return batch
}

// Empty reports whether nothing is queued.
func (q *Queue[T]) Empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) == 0
}

// Ready receives a token after a Push: the queue may then hold items. A
// consumer waits on it when Take returned nothing.
func (q *Queue[T]) Ready() <-chan struct{} { return q.ready }
