package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLockTTL is a package lock's lifetime between renewals when
// Config.LockTTL is zero.
const DefaultLockTTL = 30 * time.Second

// ErrLockLost is the cause of a locked context (Lock.Bind) cancelled
// because the lock could not be renewed before it expired: another holder
// may have it by now.
var ErrLockLost = errors.New("package lock lost")

// Lock is a held package lock: a row in package_locks with this holder as
// owner, renewed while held. It spans workers, accounts and daemon
// instances that share the database, and holds no connection between
// statements, so it may be held across a wait on Telegram. If the holder
// dies the row expires and the next taker takes it over.
type Lock struct {
	s     *Store
	name  string
	owner string
	lost  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	gone  atomic.Bool
}

var lockSeq atomic.Int64

// Lock waits for the package lock on name (e.g. "u:" + unique ids, "h:" +
// content hash). It polls while another holder has it; the row of a
// holder that stopped renewing is taken once expired. The caller must
// Unlock it, and should run its work under Bind so that it stops when the
// lock is lost.
func (s *Store) Lock(ctx context.Context, name string) (*Lock, error) {
	owner := fmt.Sprintf("%s:%d", s.id, lockSeq.Add(1))
	ttl := s.lockTTL
	wait := 5 * time.Millisecond
	for {
		tag, err := s.pool.Exec(ctx, `INSERT INTO package_locks (name, owner, until) VALUES ($1, $2, now() + $3::interval)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until, taken_at = now()
			WHERE package_locks.until < now()`, name, owner, ttl.String())
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		if tag.RowsAffected() == 1 {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lock %s: %w", name, ctx.Err())
		case <-t.C:
		}
		wait = min(wait*2, 250*time.Millisecond)
	}
	l := &Lock{s: s, name: name, owner: owner, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go l.keep(ttl)
	return l, nil
}

// keep renews the lock every ttl/3 until Unlock. A renewal that finds the
// row gone or another owner's, or no renewal before the expiry, loses it.
func (l *Lock) keep(ttl time.Duration) {
	defer close(l.done)
	deadline := time.Now().Add(ttl - ttl/6)
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		sent := time.Now()
		if !sent.Before(deadline) {
			l.lose()
			return
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		tag, err := l.s.pool.Exec(ctx, `UPDATE package_locks SET until = now() + $3::interval WHERE name = $1 AND owner = $2`,
			l.name, l.owner, ttl.String())
		cancel()
		switch {
		case err == nil && tag.RowsAffected() == 1:
			deadline = sent.Add(ttl - ttl/6)
		case err == nil:
			l.lose()
			return
		}
	}
}

func (l *Lock) lose() {
	l.gone.Store(true)
	close(l.lost)
}

// Lost is closed when the lock was lost (not when it is unlocked).
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Bind returns a context cancelled (with cause ErrLockLost) when the lock
// is lost, and its cancel function.
func (l *Lock) Bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-l.lost:
			cancel(fmt.Errorf("%s: %w", l.name, ErrLockLost))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// Unlock releases the lock. It is safe to call more than once.
func (l *Lock) Unlock() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		if l.gone.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A failed delete leaves the row to expire.
		_, _ = l.s.pool.Exec(ctx, `DELETE FROM package_locks WHERE name = $1 AND owner = $2`, l.name, l.owner)
	})
}

func newStoreID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func lockTTL(d time.Duration) time.Duration { return cmp.Or(max(d, 0), DefaultLockTTL) }
