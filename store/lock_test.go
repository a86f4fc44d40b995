package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/store"
	"stashd/tg"
)

// A package lock is a row: its holder renews it past its TTL while it
// works, holding no connection (a pool of one serves a second taker's
// attempts meanwhile), and Unlock lets the next taker in at once.
func TestPackageLockIsRenewedWhileHeldAndHoldsNoConnection(t *testing.T) {
	t.Parallel()
	// A second of TTL: renewals every third of it still land when a loaded
	// machine (make test's packages side by side, under -race) holds a
	// goroutine back for a few hundred milliseconds.
	const ttl = time.Second
	st := openConfig(t, store.Config{MaxConns: 1, LockTTL: ttl})
	held, err := st.Lock(t.Context(), "h:one")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*ttl)
	defer cancel()
	if _, err := st.Lock(ctx, "h:one"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second taker after four TTLs: %v; want it still waiting", err)
	}
	select {
	case <-held.Lost():
		t.Fatal("the renewed lock was lost")
	default:
	}
	if err := st.Ping(t.Context()); err != nil {
		t.Fatalf("the pool of one is held: %v", err)
	}
	held.Unlock()
	ctx, cancel = context.WithTimeout(t.Context(), ttl)
	defer cancel()
	next, err := st.Lock(ctx, "h:one")
	if err != nil {
		t.Fatalf("take the lock after Unlock: %v", err)
	}
	next.Unlock()
}

// The lock of a holder that stopped renewing (a dead process) is taken
// over once expired; the holder whose row was taken finds its lock lost
// and the work bound to it cancelled.
func TestExpiredPackageLockIsTakenOver(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	st := openConfig(t, store.Config{LockTTL: ttl})
	if _, err := st.Pool().Exec(t.Context(), `INSERT INTO package_locks (name, owner, until) VALUES ('u:dead', 'gone:1', now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	// Bounded, so that a Lock that waited for the dead holder's row
	// rather than take it over fails; ten TTLs leave a loaded test machine
	// room for the round trip.
	ctx, cancel := context.WithTimeout(t.Context(), 10*ttl)
	defer cancel()
	l, err := st.Lock(ctx, "u:dead")
	if err != nil {
		t.Fatalf("take over an expired lock: %v", err)
	}
	defer l.Unlock()
	work, unbind := l.Bind(t.Context())
	defer unbind()
	// Another holder takes the row (as after this holder's own expiry).
	if _, err := st.Pool().Exec(t.Context(), `UPDATE package_locks SET owner = 'other:1' WHERE name = 'u:dead'`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-work.Done():
		if !errors.Is(context.Cause(work), store.ErrLockLost) {
			t.Errorf("work cancelled with %v, want ErrLockLost", context.Cause(work))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lost lock's work went on")
	}
	l.Unlock()
	var owner string
	if err := st.Pool().QueryRow(t.Context(), `SELECT owner FROM package_locks WHERE name = 'u:dead'`).Scan(&owner); err != nil || owner != "other:1" {
		t.Errorf("owner after the lost holder's Unlock = %q, %v; want the new holder's row kept", owner, err)
	}
}

// Lock's reads are answered in its round trip, under the lock; UnlockWith
// commits its statements and the release together, and when a statement
// fails neither holds: the lock stays held until Unlock.
func TestLockReadsAndUnlockWith(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	rows := func(sql string) int {
		t.Helper()
		var n int
		if err := st.Pool().QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var pending bool
	if err := st.RequestReconcile(ctx, []tg.ChatID{-100}, "test"); err != nil {
		t.Fatal(err)
	}
	l, err := st.Lock(ctx, "d:1:-100", st.LookReconcilePending(-100, &pending))
	if err != nil {
		t.Fatal(err)
	}
	if !pending {
		t.Error("the read in the lock's round trip did not see the pending reconciliation")
	}

	bad := store.Statement{SQL: `INSERT INTO no_such_table VALUES (1)`}
	if err := l.UnlockWith(ctx, store.ClearWaitingStatement(1, -100), bad); err == nil {
		t.Fatal("UnlockWith with a failing statement reported success")
	}
	if n := rows(`SELECT count(*) FROM package_locks WHERE name = 'd:1:-100'`); n != 1 {
		t.Fatalf("after a failed UnlockWith %d lock rows, want the lock still held", n)
	}
	select {
	case <-l.Lost():
		t.Fatal("a failed UnlockWith lost the lock")
	default:
	}

	if err := st.FinishReconcile(ctx, -100, nil); err != nil {
		t.Fatal(err)
	}
	done := store.Statement{SQL: `UPDATE reconciles SET last_error = 'released with the lock' WHERE destination_chat_id = -100`}
	if err := l.UnlockWith(ctx, done); err != nil {
		t.Fatal(err)
	}
	if n := rows(`SELECT count(*) FROM package_locks WHERE name = 'd:1:-100'`); n != 0 {
		t.Fatalf("after UnlockWith %d lock rows, want none", n)
	}
	if n := rows(`SELECT count(*) FROM reconciles WHERE last_error = 'released with the lock'`); n != 1 {
		t.Fatalf("UnlockWith's statement wrote %d rows, want 1", n)
	}
	l.Unlock() // released already: nothing to do, no panic
	next, err := st.Lock(ctx, "d:1:-100", st.LookReconcilePending(-100, &pending))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Unlock()
	if pending {
		t.Error("a finished reconciliation read as pending")
	}
}

// A renewal that finds the lock's row gone while a unit that releases it
// is on its way stops renewing. When that unit then fails, it did not
// delete the row (a failover lost it): the lock is lost, not left looking
// held with nobody renewing it.
func TestRowGoneWhileAReleaseFailsLosesTheLock(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	st := openConfig(t, store.Config{GroupCommitFlushes: 1, LockTTL: ttl})
	w := &groupCommitWorld{t: t, st: st}
	ctx := t.Context()
	l, err := st.Lock(ctx, "d:7:-100")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	release := w.hold(71)
	failed := make(chan error, 1)
	go func() { failed <- l.UnlockWith(context.Background(), store.Statement{SQL: `SELECT 1/0`}) }()
	w.waitQueued(1)
	if _, err := st.Pool().Exec(ctx, `DELETE FROM package_locks WHERE name = 'd:7:-100'`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * ttl / 3) // two renewals' time: the first finds the row gone
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-failed; err == nil {
		t.Fatal("UnlockWith of a failing statement reported success")
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the lock whose row vanished still looks held after its release failed")
	}
}

// An attempt to take a lock whose caller gives up while it is on its way
// (a worker stopped, a daemon shutting down) leaves no lock behind: the
// server commits the attempt after the caller stopped reading its answer,
// and the package must not then wait for the lock's expiry (30 s here).
// The caller gives up as soon as the attempt's BEGIN is answered.
func TestLockAttemptOfACallerGoneLeavesNoLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tr := &giveUpTracer{}
	st := openConfig(t, store.Config{Tracer: tr})
	for _, durable := range []bool{false, true} {
		attempt, giveUp := context.WithCancel(ctx)
		tr.arm(giveUp)
		var err error
		var l *store.Lock
		read := store.Statement{SQL: "SELECT 1"}
		if durable {
			l, err = st.Lock(attempt, "u:gone", read)
		} else {
			l, err = st.LockThen(attempt, "u:gone", read)
		}
		if err == nil {
			l.Unlock()
			t.Fatalf("durable %v: the attempt took the lock for a caller gone", durable)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("durable %v: attempt of a caller gone: %v, want context.Canceled", durable, err)
		}
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		l, err = st.Lock(short, "u:gone")
		cancel()
		if err != nil {
			t.Fatalf("durable %v: the lock is held by nobody after its caller gave up: %v", durable, err)
		}
		l.Unlock()
	}
}

// giveUpTracer cancels the context it is armed with once the answer to a
// batch's BEGIN has been read.
type giveUpTracer struct {
	batchTracer
	mu     sync.Mutex
	giveUp context.CancelFunc
}

func (g *giveUpTracer) arm(cancel context.CancelFunc) {
	g.mu.Lock()
	g.giveUp = cancel
	g.mu.Unlock()
}

func (g *giveUpTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if d.SQL != "BEGIN" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.giveUp != nil {
		g.giveUp()
		g.giveUp = nil
	}
}

// batchTracer is a pgx tracer that does nothing but what its TraceBatchQuery
// does with each statement of a batch.
type batchTracer struct{}

func (batchTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (batchTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (batchTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (batchTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// A lock taken ahead rides in the unit that releases another lock: it is
// the caller's once that unit committed, with its reads read while it was
// held, and renewed like any lock; taken by another holder, or carried by
// a unit that failed, it is nobody's and leaves no row.
func TestLockAheadRidesInAnotherLocksRelease(t *testing.T) {
	t.Parallel()
	// Long enough that a loaded machine (make test runs packages side by
	// side) still renews within it: the renewal, not its timing, is what
	// this tests.
	const ttl = time.Second
	st := openConfig(t, store.Config{LockTTL: ttl})
	ctx := t.Context()
	names := func() []string {
		t.Helper()
		var out []string
		rows, err := st.Pool().Query(ctx, `SELECT name FROM package_locks ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	first, err := st.Lock(ctx, "d:1:-100")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RequestReconcile(ctx, []tg.ChatID{-100}, "test"); err != nil {
		t.Fatal(err)
	}
	var pending bool
	ahead := st.LockAhead("d:2:-100", st.LookReconcilePending(-100, &pending))
	if err := first.UnlockWith(ctx, ahead.Statements()...); err != nil {
		t.Fatal(err)
	}
	second := ahead.Take()
	if second == nil || !pending {
		t.Fatalf("lock taken ahead: %v, its read saw the pending reconciliation: %v; want both", second, pending)
	}
	if got := names(); len(got) != 1 || got[0] != "d:2:-100" {
		t.Fatalf("lock rows %v, want the one taken ahead alone", got)
	}
	time.Sleep(ttl + ttl/2) // renewed past its TTL
	other, err := st.Lock(ctx, "d:3:-100")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unlock()
	select {
	case <-second.Lost():
		t.Fatal("the lock taken ahead was lost: not renewed")
	default:
	}
	taken := st.LockAhead("d:3:-100")
	if err := second.UnlockWith(ctx, taken.Statements()...); err != nil {
		t.Fatal(err)
	}
	if l := taken.Take(); l != nil {
		t.Fatal("a lock another holder has was taken ahead")
	}
	failing := st.LockAhead("d:4:-100")
	held, err := st.Lock(ctx, "d:5:-100")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	if err := held.UnlockWith(ctx, append(failing.Statements(), store.Statement{SQL: `SELECT 1/0`})...); err == nil {
		t.Fatal("a unit with a failing statement reported success")
	}
	if l := failing.Take(); l != nil {
		t.Fatal("a lock taken ahead by a unit that failed was handed out")
	}
	if got := names(); len(got) != 2 || got[0] != "d:3:-100" || got[1] != "d:5:-100" {
		t.Fatalf("lock rows %v, want d:3:-100 and d:5:-100 alone", got)
	}
}

// TryLocksThen takes in one round trip the locks no other holder has,
// reads after each, and waits for none; when any statement fails it holds
// nothing.
func TestTryLocksThen(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	held, err := st.Lock(ctx, "u:b")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	var pending bool
	if err := st.RequestReconcile(ctx, []tg.ChatID{-100}, "test"); err != nil {
		t.Fatal(err)
	}
	locks, err := st.TryLocksThen(ctx, []store.LockRequest{{Name: "u:a", Reads: []store.Statement{st.LookReconcilePending(-100, &pending)}}, {Name: "u:b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 2 || locks[0] == nil || locks[1] != nil || !pending {
		t.Fatalf("locks %v, read %v; want u:a taken with its read, u:b left to its holder", locks, pending)
	}
	locks[0].Unlock()
	if _, err := st.TryLocksThen(ctx, []store.LockRequest{{Name: "u:c"}, {Name: "u:d", Reads: []store.Statement{{SQL: `SELECT 1/0`}}}}); err == nil {
		t.Fatal("TryLocksThen with a failing read reported success")
	}
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM package_locks WHERE name <> 'u:b'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d lock rows besides the holder's (%v), want none", n, err)
	}
}

// A lock taken ahead counts its life from the group commit that took it,
// not from Take, nor from when its statements were made: taken later than
// its TTL allows (a flood wait on the way), it is lost at once instead of
// held, and renewed, past the expiry of its row, which another holder may
// have taken meanwhile.
func TestLockTakenAheadLateIsLost(t *testing.T) {
	t.Parallel()
	// Long enough that a loaded test machine does not hold back the
	// renewals (every third of it) past it.
	const ttl = 2 * time.Second
	st := openConfig(t, store.Config{LockTTL: ttl})
	ctx := t.Context()
	carrier, err := st.Lock(ctx, "d:carrier")
	if err != nil {
		t.Fatal(err)
	}
	ahead := st.LockAhead("d:late")
	if err := carrier.UnlockWith(ctx, ahead.Statements()...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl) // the row has expired
	l := ahead.Take()
	if l == nil {
		t.Fatal("the attempt did not take the lock")
	}
	defer l.Unlock()
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("a lock taken ahead past its expiry is held")
	}

	// Taken in time, it is renewed as any lock, however long before the
	// commit that carries it its statements were made (a delivery makes
	// them when it starts, and commits them with its last send's record).
	carrier, err = st.Lock(ctx, "d:carrier")
	if err != nil {
		t.Fatal(err)
	}
	ahead = st.LockAhead("d:prompt")
	stmts := ahead.Statements()
	time.Sleep(ttl)
	if err := carrier.UnlockWith(ctx, stmts...); err != nil {
		t.Fatal(err)
	}
	l2 := ahead.Take()
	if l2 == nil {
		t.Fatal("the attempt did not take the lock")
	}
	defer l2.Unlock()
	select {
	case <-l2.Lost():
		t.Fatal("a lock taken ahead in time was lost")
	case <-time.After(3 * ttl):
	}
}
