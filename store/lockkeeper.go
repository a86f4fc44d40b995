package store

import (
	"context"
	"sync"
	"time"
)

// lockKeeper renews the package locks a Store holds, all those due in one
// statement a round: a lock is due a third of the TTL after the attempt
// that took it or its last renewal was sent, and lost at its deadline, a
// sixth of the TTL before its row would expire, if no renewal landed by
// then. A round also renews the locks due within a sixth of the TTL after
// it, so that locks taken one by one share rounds: at most about six a
// TTL, however many locks. A backlog's messages in flight each hold a
// lock while they wait for a download slot (a hundred and more an
// account): one statement a round, not one a lock, and one goroutine,
// not one a lock.
type lockKeeper struct {
	mu sync.Mutex
	// locks are the locks renewed; a renewal round's are in it too until
	// released or lost.
	locks map[*Lock]struct{}
	// running: the keeper's goroutine runs; it ends once locks is empty.
	running bool
	// at is when the sleeping goroutine wakes (the earliest due or
	// deadline), wake what wakes it sooner for a lock due before then.
	at   time.Time
	wake chan struct{}
	// round is closed when the renewal in flight has been read; nil when
	// none is.
	round chan struct{}
}

// renewLocksSQL renews the rows of locks still held by their owners and
// returns the owners it renewed.
const renewLocksSQL = `UPDATE package_locks AS l SET until = now() + $3::interval
	FROM unnest($1::text[], $2::text[]) AS k(name, owner)
	WHERE l.name = k.name AND l.owner = k.owner
	RETURNING l.owner`

// keepLock renews l from now on; since is when the attempt that took it was
// sent.
func (s *Store) keepLock(l *Lock, since time.Time) {
	k := &s.keeper
	ttl := s.lockTTL
	k.mu.Lock()
	defer k.mu.Unlock()
	l.next, l.deadline = since.Add(ttl/3), since.Add(ttl-ttl/6)
	if k.locks == nil {
		k.locks = make(map[*Lock]struct{})
		k.wake = make(chan struct{}, 1)
	}
	k.locks[l] = struct{}{}
	switch {
	case !k.running:
		k.running = true
		go s.keepLocks()
	case l.next.Before(k.at):
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}

// dropLock stops renewing l and returns the round in flight that renews
// it, if any: its answer may still find l's row gone.
func (s *Store) dropLock(l *Lock) (round <-chan struct{}) {
	k := &s.keeper
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.locks, l)
	if len(k.locks) == 0 && k.running {
		// The last one: the goroutine ends now, not at its next wake.
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
	if l.inRound {
		return k.round
	}
	return nil
}

// keepLocks is the keeper's goroutine: it renews the locks due, loses
// those past their deadline, and sleeps until the next is due.
func (s *Store) keepLocks() {
	k := &s.keeper
	early := s.lockTTL / 6
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		var due, lost []*Lock
		var at time.Time
		k.mu.Lock()
		if len(k.locks) == 0 {
			k.running = false
			k.mu.Unlock()
			return
		}
		for l := range k.locks {
			switch {
			case !now.Before(l.deadline):
				delete(k.locks, l)
				lost = append(lost, l)
			case !now.Before(l.next.Add(-early)):
				due = append(due, l)
				l.inRound = true
			default:
				if next := earlier(l.next, l.deadline); at.IsZero() || next.Before(at) {
					at = next
				}
			}
		}
		var round chan struct{}
		if len(due) > 0 {
			round = make(chan struct{})
			k.round = round
		}
		k.at = at
		k.mu.Unlock()
		for _, l := range lost {
			l.lose()
		}
		if len(due) > 0 {
			s.renewLocks(due, now, round)
			continue
		}
		if at.IsZero() {
			continue // every lock was lost: the loop ends
		}
		timer.Reset(time.Until(at))
		select {
		case <-timer.C:
		case <-k.wake:
		}
	}
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// renewLocks sends one renewal of due, the locks due at sent, bounded by
// the earliest of their deadlines, and closes round once it has been
// read. A lock renewed is due again a third of the TTL later. A lock whose
// row is gone or another's is lost, unless a unit that deletes its row is
// on its way (releasing): it then stops being renewed, and that unit's
// fate decides (released, notReleased). A renewal that fails is tried
// again a third of the TTL later, or the deadline loses the lock first.
func (s *Store) renewLocks(due []*Lock, sent time.Time, round chan struct{}) {
	ttl := s.lockTTL
	deadline := due[0].deadline
	names, owners := make([]string, len(due)), make([]string, len(due))
	for i, l := range due {
		names[i], owners[i] = l.name, l.owner
		deadline = earlier(deadline, l.deadline)
	}
	renewed := make(map[string]bool, len(due))
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	rows, err := s.pool.Query(ctx, renewLocksSQL, names, owners, ttl.String())
	if err == nil {
		for rows.Next() {
			var owner string
			if err = rows.Scan(&owner); err != nil {
				break
			}
			renewed[owner] = true
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	cancel()
	k := &s.keeper
	var gone []*Lock
	k.mu.Lock()
	for _, l := range due {
		l.inRound = false
		switch {
		case err != nil:
			l.next = sent.Add(ttl / 3)
		case renewed[l.owner]:
			l.next, l.deadline = sent.Add(ttl/3), sent.Add(ttl-ttl/6)
		default:
			delete(k.locks, l)
			gone = append(gone, l)
		}
	}
	k.round = nil
	k.mu.Unlock()
	for _, l := range gone {
		l.mu.Lock()
		releasing := l.releasing
		l.parked = releasing
		l.mu.Unlock()
		if !releasing {
			l.lose()
		}
	}
	close(round)
}
