package demo

import (
	"context"
	"slices"
	"time"

	"stashd/tg"
)

// topicReopenAfter is how long a topic the demo's administrator closed
// stays closed, unless stashd reopens it first.
const topicReopenAfter = 1500 * time.Millisecond

// topicFaults plays an administrator of the destination forum while
// publishing runs: every eighth of the run (at least every 500 ms) each of
// its topics is closed with Options.CloseTopics, and reopened
// topicReopenAfter later, or deleted with Options.DeleteTopics, messages
// and all. stashd reopens the closed topics it created (or waits for their
// reopening) and creates the deleted ones again. A fault asked for that
// has not happened by the end of publishing (stashd made its first topic
// late on a loaded machine) is still played once topics are there, for
// up to Options.SettleTimeout after published closes; then the topics
// still closed are reopened and topicFaults returns.
func (r *runner) topicFaults(ctx context.Context, published <-chan struct{}) {
	forum := r.gen.ForumDestination()
	if forum == 0 || r.o.CloseTopics <= 0 && r.o.DeleteTopics <= 0 {
		return
	}
	every := max(r.o.Duration/8, 500*time.Millisecond)
	closedAt := map[int64]time.Time{}
	reopen := func(due func(time.Time) bool) {
		topics := r.world.Topics(forum)
		for thread, at := range closedAt {
			if !due(at) {
				continue
			}
			if _, ok := topics[thread]; ok && r.world.TopicClosed(forum, thread) {
				r.world.CloseTopic(forum, thread, false)
			}
			delete(closedAt, thread)
		}
	}
	defer reopen(func(time.Time) bool { return true })
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	next := time.Now().Add(every)
	var overtime <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-overtime:
			return
		case <-published:
			if r.topicFaultsDone() {
				return
			}
			published, overtime = nil, time.After(r.o.SettleTimeout)
		case now := <-tick.C:
			reopen(func(at time.Time) bool { return now.Sub(at) >= topicReopenAfter })
			if now.Before(next) {
				continue
			}
			next = now.Add(every)
			r.hitTopics(forum, closedAt, now)
			switch done := r.topicFaultsDone(); {
			case done && overtime != nil:
				return
			case !done:
				// A fault asked for has not happened yet (no topic to
				// hit, or a close first): look again at the next tick,
				// so that a slow machine, whose first topic comes late,
				// still gets each.
				next = now
			}
		}
	}
}

// topicFaultsDone reports whether each topic fault asked for has
// happened at least once.
func (r *runner) topicFaultsDone() bool {
	closed, deleted := r.world.TopicEvents()
	return (r.o.CloseTopics <= 0 || closed > 0) && (r.o.DeleteTopics <= 0 || deleted > 0)
}

// hitTopics closes or deletes each topic of forum by the fault knobs, in
// thread order so that a seed gives the same choices. A knob above zero
// hits a topic for certain the first time one is there to hit (a close
// first: the closed topic is still there for a deletion at the next
// moment), so that a short run on a slow machine, which makes few topics,
// still has each fault it asked for.
func (r *runner) hitTopics(forum tg.ChatID, closedAt map[int64]time.Time, now time.Time) {
	topics := r.world.Topics(forum)
	threads := make([]int64, 0, len(topics))
	for thread := range topics {
		threads = append(threads, thread)
	}
	slices.Sort(threads)
	for _, thread := range threads {
		closed, deleted := r.world.TopicEvents()
		isClosed := r.world.TopicClosed(forum, thread)
		switch {
		case r.o.CloseTopics > 0 && closed == 0 && !isClosed:
			r.world.CloseTopic(forum, thread, true)
			closedAt[thread] = now
		case r.o.DeleteTopics > 0 && deleted == 0 || r.chance(r.o.DeleteTopics):
			r.world.DeleteTopic(forum, thread)
			delete(closedAt, thread)
		case r.chance(r.o.CloseTopics) && !isClosed:
			r.world.CloseTopic(forum, thread, true)
			closedAt[thread] = now
		}
	}
}
