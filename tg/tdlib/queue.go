package tdlib

import (
	"stashd/internal/fifo"
	"stashd/tg"
)

// updateQueue is the unbounded FIFO between the update pump and the consumer
// of Updates(). push never blocks, so the pump never blocks, and neither
// does go-tdlib's receiver behind it: a stalled consumer costs memory, not
// every pending request's response. It is bounded in practice by the
// consumer, tg.Session, which drains continuously.
type updateQueue struct {
	*fifo.Queue[tg.Update]
}

func newUpdateQueue() *updateQueue {
	return &updateQueue{fifo.New[tg.Update]()}
}

// push appends u and returns the queue's new length.
func (q *updateQueue) push(u tg.Update) int { return q.Push(u) }

// forward delivers the queued updates to out, in order, and closes out when
// it returns: when stop is closed (what is still queued is dropped), or when
// end is closed, meaning no more pushes come, and everything queued has been
// delivered.
func (q *updateQueue) forward(out chan<- tg.Update, end, stop <-chan struct{}) {
	defer close(out)
	for {
		batch := q.Take()
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
		case <-q.Ready():
		case <-end:
			// Every push happened before end was closed, so an empty queue
			// now stays empty.
			if q.Empty() {
				return
			}
		case <-stop:
			return
		}
	}
}
