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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
	once  sync.Once
	// loseOnce closes lost.
	loseOnce sync.Once
	// next is when it is due for renewal, deadline when it is lost if no
	// renewal landed; inRound says a renewal of it is in flight. The
	// store's lockKeeper guards them.
	next, deadline time.Time
	inRound        bool

	// mu guards releasing and parked. releasing is set while a unit that
	// deletes the lock's row is being committed (releaseStatement): a
	// renewal that finds the row gone then stops renewing (parked), as
	// the lock is most likely released. If that unit then fails, the row
	// went another way (a failover that lost it) and the lock is lost.
	mu        sync.Mutex
	releasing bool
	parked    bool
}

var lockSeq atomic.Int64

// newOwner returns an owner unique to one lock attempt of this store.
func (s *Store) newOwner() string { return fmt.Sprintf("%s:%d", s.id, lockSeq.Add(1)) }

// Lock waits for the package lock on name (e.g. "u:" + unique ids, "h:" +
// content hash). It polls while another holder has it; the row of a
// holder that stopped renewing is taken once expired. The caller must
// Unlock it, and should run its work under Bind so that it stops when the
// lock is lost.
//
// Reads, when given, are sent in the same round trip as each attempt, as
// with LockThen, but the attempt's commit waits for the WAL flush: Lock is
// for locks whose loss could duplicate an effect (the delivery lock, which
// guards sends).
func (s *Store) Lock(ctx context.Context, name string, reads ...Statement) (*Lock, error) {
	return s.lock(ctx, name, true, reads)
}

// LockThen is Lock with reads (LookPackageByHash…) sent in the same round
// trip as each attempt to take the lock, after it, in its transaction:
// when it returns the lock, every read has read its answer while the lock
// was held, so the look again that follows taking a lock costs no round
// trip of its own. The answers of an attempt that did not take the lock
// are discarded.
//
// It is for locks whose loss costs duplicated work, never a duplicated
// effect (the ingest locks: the catalogue's constraints make their work
// exact): the attempt commits without waiting for the WAL flush
// (synchronous_commit off), sparing the taker a disk flush. A PostgreSQL
// server that crashes within that flush's delay (a fraction of a second,
// and only when no synchronous commit followed) forgets the lock; its
// holder's next renewal finds it lost and stops its work. The delivery
// lock, which guards sends, is taken with Lock.
func (s *Store) LockThen(ctx context.Context, name string, reads ...Statement) (*Lock, error) {
	return s.lock(ctx, name, false, reads)
}

func (s *Store) lock(ctx context.Context, name string, durable bool, reads []Statement) (*Lock, error) {
	owner := s.newOwner()
	ttl := s.lockTTL
	wait := 5 * time.Millisecond
	var since time.Time
	for {
		since = time.Now()
		got, err := s.tryLock(ctx, name, owner, ttl, durable, reads)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		if got {
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
	return s.held(name, owner, since), nil
}

// held returns the Lock of a row taken by an attempt sent at since (its
// expiry is then at the latest since + the TTL), renewed from then on.
func (s *Store) held(name, owner string, since time.Time) *Lock {
	l := &Lock{s: s, name: name, owner: owner, lost: make(chan struct{})}
	s.keepLock(l, since)
	return l
}

const lockSQL = `INSERT INTO package_locks (name, owner, until) VALUES ($1, $2, now() + $3::interval)
	ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until, taken_at = now()
	WHERE package_locks.until < now()`

// lockStatement is one attempt to take the lock on name for owner, which
// tells took whether it did.
func lockStatement(name, owner string, ttl time.Duration, took func(bool)) Statement {
	return Statement{SQL: lockSQL, Args: []any{name, owner, ttl.String()}, Read: func(rows pgx.Rows) error {
		rows.Close()
		took(rows.CommandTag().RowsAffected() == 1)
		return rows.Err()
	}}
}

// sendAttempt runs an attempt to take locks (run, on a connection of its
// own) as tryLock describes: the wait for the connection ends with ctx,
// but the attempt once sent is read to its end whatever ctx, within
// attemptTimeout. sent is false when it failed before anything was sent.
func (s *Store) sendAttempt(ctx context.Context, run func(context.Context, *pgxpool.Conn) error) (sent bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
	err = run(actx, conn)
	cancel()
	conn.Release() // before the caller's deletes, which take a connection of their own
	return true, err
}

// attemptTimeout bounds one attempt to take a lock (see tryLock).
const attemptTimeout = 10 * time.Second

// tryLock makes one attempt to take the lock and, when it did, reads.
//
// The wait for a connection ends with ctx, but an attempt once sent is
// read to its end, whatever ctx (within attemptTimeout): cut short by ctx,
// its answer would be lost while the server still commits it, and the
// package would stay locked by nobody until the row expires. Taken for a
// caller gone meanwhile, the lock is let go at once. An attempt that fails
// otherwise (the connection broken) may have taken the lock too: its row
// is this attempt's own (owner is unique to one Lock call), so it is
// deleted.
func (s *Store) tryLock(ctx context.Context, name, owner string, ttl time.Duration, durable bool, reads []Statement) (bool, error) {
	var got bool
	sent, err := s.sendAttempt(ctx, func(actx context.Context, conn *pgxpool.Conn) (err error) {
		got, err = attemptLock(actx, conn, name, owner, ttl, durable, reads)
		return err
	})
	switch {
	case !sent:
		return false, err
	case err != nil:
		deleteLockRow(ctx, s, name, owner)
		return false, err
	case ctx.Err() != nil:
		if got {
			deleteLockRow(ctx, s, name, owner)
		}
		return false, ctx.Err()
	}
	return got, nil
}

func attemptLock(ctx context.Context, conn *pgxpool.Conn, name, owner string, ttl time.Duration, durable bool, reads []Statement) (bool, error) {
	if len(reads) == 0 {
		tag, err := conn.Exec(ctx, lockSQL, name, owner, ttl.String())
		return err == nil && tag.RowsAffected() == 1, err
	}
	// One transaction, in one round trip (Look): a read that fails undoes
	// the lock taken before it. Unless durable, its commit does not wait
	// for the WAL flush (see LockThen).
	var got bool
	stmts := make([]Statement, 0, len(reads)+2)
	if !durable {
		stmts = append(stmts, Statement{SQL: "SET LOCAL synchronous_commit TO off"})
	}
	stmts = append(stmts, lockStatement(name, owner, ttl, func(took bool) { got = took }))
	if err := look(ctx, conn, append(stmts, reads...)); err != nil {
		return false, err
	}
	return got, nil
}

// LockRequest is one lock of TryLocksThen: its name and the reads that
// follow the attempt to take it.
type LockRequest struct {
	Name  string
	Reads []Statement
}

// TryLocksThen makes one attempt at each lock of reqs, each followed by
// its reads, all in one round trip and one transaction that, as LockThen's,
// does not wait for the WAL flush: ingest locks the messages of a page
// ahead of its workers. It returns the locks in the order of reqs, nil
// where another holder has one (its reads are to be ignored); it does not
// wait for those. On error, no lock is held.
func (s *Store) TryLocksThen(ctx context.Context, reqs []LockRequest) ([]*Lock, error) {
	owners := make([]string, len(reqs))
	got := make([]bool, len(reqs))
	stmts := []Statement{{SQL: "SET LOCAL synchronous_commit TO off"}}
	for i, r := range reqs {
		owners[i] = s.newOwner()
		stmts = append(stmts, lockStatement(r.Name, owners[i], s.lockTTL, func(took bool) { got[i] = took }))
		stmts = append(stmts, r.Reads...)
	}
	since := time.Now()
	sent, err := s.sendAttempt(ctx, func(actx context.Context, conn *pgxpool.Conn) error { return look(actx, conn, stmts) })
	if sent && err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if sent && err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, _ = s.pool.Exec(dctx, `DELETE FROM package_locks WHERE owner = ANY($1)`, owners)
		cancel()
	}
	if err != nil {
		return nil, fmt.Errorf("lock %d packages: %w", len(reqs), err)
	}
	locks := make([]*Lock, len(reqs))
	for i, r := range reqs {
		if got[i] {
			locks[i] = s.held(r.Name, owners[i], since)
		}
	}
	return locks, nil
}

// LockAhead is an attempt to take the durable package lock on name (as
// Lock) in the unit of work that releases another lock (UnlockWith,
// MarkSentAndUnlock), with reads after it: the delivery stage takes the
// next delivery's lock in the round trip that records the last one. Its
// Statements go into that unit; Take, once the unit's commit returned,
// gives the lock when the unit committed and took it.
type LockAhead struct {
	s     *Store
	name  string
	owner string
	reads []Statement
	// mu guards got and committed, set in the committer: a caller that
	// stopped waiting for its unit may Take while the unit still runs.
	mu             sync.Mutex
	got, committed bool
	// taken: Take has been called; a unit committing after it lets its
	// lock go.
	taken bool
	// flushed is when the group commit that carried the attempt started,
	// before its transaction began (the row's expiry is at the latest one
	// TTL later).
	flushed time.Time
}

// LockAhead returns an attempt to take the lock on name, to be sent with
// another unit (LockAhead.Statements).
func (s *Store) LockAhead(name string, reads ...Statement) *LockAhead {
	return &LockAhead{s: s, name: name, owner: s.newOwner(), reads: reads}
}

// Name is the name of the lock the attempt takes.
func (a *LockAhead) Name() string { return a.name }

// Statements are the attempt and its reads, for the unit that carries
// them; its reads see the lock held only if Take returns it.
func (a *LockAhead) Statements() []Statement {
	try := lockStatement(a.name, a.owner, a.s.lockTTL, func(took bool) {
		a.mu.Lock()
		a.got = took
		a.mu.Unlock()
	})
	try.Committed = func() {
		a.mu.Lock()
		a.committed = true
		orphan := a.taken && a.got
		a.mu.Unlock()
		if orphan { // Take gave up on it while the unit was in flight
			go deleteLockRow(context.Background(), a.s, a.name, a.owner)
		}
	}
	try.Flushing = func(at time.Time) {
		a.mu.Lock()
		a.flushed = at
		a.mu.Unlock()
	}
	return append([]Statement{try}, a.reads...)
}

// Take returns the lock the attempt took, renewed like one Lock returned
// (its life counted from the group commit that took it), or nil: another
// holder has it, or the unit that carried the attempt failed or never
// ran. A unit whose fate is unknown (its commit cut off) may have taken
// it: that row is deleted, and so is the row of a unit still in flight,
// once it commits.
func (a *LockAhead) Take() *Lock {
	a.mu.Lock()
	got, committed, flushed := a.got, a.committed, a.flushed
	a.taken = true
	a.mu.Unlock()
	switch {
	case got && committed:
		// Renewed as from the group commit that took it, not from now:
		// the caller may take the lock long after that commit (a flood
		// wait on the way), and a lock whose row may have expired
		// meanwhile is lost at once, not held past its expiry.
		return a.s.held(a.name, a.owner, flushed)
	case got:
		deleteLockRow(context.Background(), a.s, a.name, a.owner)
	}
	return nil
}

func (l *Lock) lose() {
	l.loseOnce.Do(func() { close(l.lost) })
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
		if round := l.s.dropLock(l); round != nil {
			<-round
		}
		select {
		case <-l.lost:
			return // the row is another's, or gone
		default:
		}
		deleteLockRow(context.Background(), l.s, l.name, l.owner)
	})
}

// releaseStatement deletes the lock's row, for a unit of work that
// releases the lock when it commits (UnlockWith, CataloguePackage); once
// the unit committed the lock is released. A unit that fails must tell
// notReleased.
func (l *Lock) releaseStatement() Statement {
	return Statement{SQL: unlockSQL, Args: []any{l.name, l.owner}, Committed: l.startRelease()}
}

// startRelease marks the lock as being released by a unit that deletes its
// row (releaseStatement, or a statement that deletes it among other
// work) and returns what that unit runs once committed.
func (l *Lock) startRelease() (committed func()) {
	l.mu.Lock()
	l.releasing = true
	l.mu.Unlock()
	return l.released
}

const unlockSQL = `DELETE FROM package_locks WHERE name = $1 AND owner = $2`

// deleteLockRow deletes a lock's row, within 10 s whatever ctx (a
// cancelled caller still lets its lock go). A failed delete leaves the
// row to expire.
func deleteLockRow(ctx context.Context, s *Store, name, owner string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = s.pool.Exec(ctx, unlockSQL, name, owner)
}

// UnlockWith commits stmts and the lock's release as one unit of the
// group commit: what the lock guarded is recorded and the lock let go in
// one round trip, and nobody takes the lock before the record is visible.
// When it fails nothing of it holds and the lock is still held (Unlock
// releases it), unless a renewal found its row gone meanwhile: then it is
// lost (Lost is closed).
func (l *Lock) UnlockWith(ctx context.Context, stmts ...Statement) error {
	if err := l.s.Commit(ctx, append(stmts, l.releaseStatement())...); err != nil {
		l.notReleased()
		return err
	}
	return nil
}

// notReleased is told that the unit that was to delete the lock's row
// failed: the lock is still held, or lost if a renewal found its row gone
// meanwhile (this unit did not delete it).
func (l *Lock) notReleased() {
	l.mu.Lock()
	l.releasing = false
	parked := l.parked
	l.mu.Unlock()
	if parked {
		l.lose()
	}
}

// released is Unlock for a lock whose row a committed unit deleted: it
// stops the renewals and deletes nothing more. A unit that did not commit
// leaves the lock held (the caller's Unlock releases it).
//
// It does not wait for a renewal in flight: it runs in the group
// committer, which holds a connection and the other units' answers, and a
// renewal may be waiting for a connection itself. A renewal in flight
// finds the row gone and the lock releasing, and stops.
func (l *Lock) released() {
	l.once.Do(func() { l.s.dropLock(l) })
}

func newStoreID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func lockTTL(d time.Duration) time.Duration { return cmp.Or(max(d, 0), DefaultLockTTL) }
