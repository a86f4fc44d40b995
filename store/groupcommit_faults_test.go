package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// A Read whose Scan fails (a client-side error, not a PgError) in one unit
// of a batch is that reader's failure: the server runs the rest of the
// pipelined batch, COMMIT included, so the other units are told their
// commit and their Committed callbacks run.
func TestGroupCommitScanFailureIsTheReadersAlone(t *testing.T) {
	t.Parallel()
	w := newGroupCommitWorld(t, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL)`)
	var committed [3]atomic.Bool
	units := make([][]store.Statement, 3)
	for i := range units {
		st := insert(i)
		st.Committed = func() { committed[i].Store(true) }
		units[i] = []store.Statement{st}
	}
	// Unit 1's reader scans a NULL into an int: pgx's Scan fails, and
	// rows.Err() then returns that scan error.
	units[1][0].SQL += ` RETURNING NULL::int`
	units[1][0].Read = func(rows pgx.Rows) error {
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	errs := w.commitAll(units)
	got := w.rows()
	for i, err := range errs {
		_, inDB := got[i]
		t.Logf("unit %d: err=%v; row committed=%v; Committed callback ran=%v", i, err, inDB, committed[i].Load())
		if i != 1 && err != nil && inDB {
			t.Errorf("unit %d told failure (%v) although its row committed", i, err)
		}
		if inDB && !committed[i].Load() {
			t.Errorf("unit %d committed but its Committed callback did not run", i)
		}
	}
}

// A unit whose Read fails (its statement succeeded) is told the reader's
// error, also when a unit after it in the same batch fails and the rest
// is sent again.
func TestGroupCommitReadFailureSurvivesALaterFailure(t *testing.T) {
	t.Parallel()
	w := newGroupCommitWorld(t, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL);
		INSERT INTO gc VALUES (1000, 0)`)
	readerErr := errors.New("reader failed")
	a := insert(1)
	a.Read = func(rows pgx.Rows) error { return readerErr }
	units := [][]store.Statement{{a}, {insert(1000)}, {insert(3)}}
	errs := w.commitAll(units)
	t.Logf("errs: %v", errs)
	if !errors.Is(errs[0], readerErr) {
		t.Errorf("unit 0 (its Read failed) told %v, want the reader's error", errs[0])
	}
	// And with no failing neighbour.
	errs = w.commitAll([][]store.Statement{{func() store.Statement { s := insert(4); s.Read = a.Read; return s }()}, {insert(5)}})
	if !errors.Is(errs[0], readerErr) || errs[1] != nil {
		t.Errorf("alone: told %v, %v; want the reader's error, nil", errs[0], errs[1])
	}
}

// A unit that pgx refuses before the batch is sent fails alone, and the
// units beside it commit: an argument it cannot encode, or SQL the server
// refuses at prepare time (an undefined column, raised while pgx prepares
// the batch's new statements, before BEGIN).
func TestGroupCommitRefusedUnitFailsAlone(t *testing.T) {
	t.Parallel()
	for name, bad := range map[string]store.Statement{
		"unencodable argument":   {SQL: `INSERT INTO gc (k, tx) VALUES ($1, txid_current())`, Args: []any{make(chan int)}},
		"unpreparable statement": {SQL: `UPDATE gc SET nope = 1 WHERE k = $1`, Args: []any{1}},
	} {
		w := newGroupCommitWorld(t, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL)`)
		errs := w.commitAll([][]store.Statement{{insert(1)}, {bad}, {insert(3)}})
		if errs[0] != nil || errs[1] == nil || errs[2] != nil {
			t.Errorf("%s: units told %v; want only unit 1 failed", name, errs)
		}
		if got := w.rows(); len(got) != 2 {
			t.Errorf("%s: rows %v, want keys 1 and 3", name, got)
		}
	}
}

// The same through the store's API: MarkSentAll of a delivery that has
// no row is told its reader's error (no rows), alone and when a unit after
// it in the same batch fails; it never reports message 0 as recorded.
func TestGroupCommitMarkSentOfAMissingRowFailsBesideAFailure(t *testing.T) {
	t.Parallel()
	w := newGroupCommitWorld(t, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL);
		INSERT INTO gc VALUES (1000, 0)`)
	ctx := t.Context()
	missing := store.Delivery{PackageID: 424242, Destination: -100, PartIndex: 0, Account: "a"}

	// Alone: told the reader's error.
	_, alone := w.st.MarkSentAll(ctx, []store.Delivery{missing}, []tg.MessageID{77})
	t.Logf("alone: %v", alone)

	release := w.hold(1)
	type res struct {
		recorded []tg.MessageID
		err      error
	}
	marked := make(chan res, 1)
	go func() {
		r, err := w.st.MarkSentAll(context.Background(), []store.Delivery{missing}, []tg.MessageID{77})
		marked <- res{r, err}
	}()
	w.waitQueued(1)
	failing := make(chan error, 1)
	go func() { failing <- w.st.Commit(context.Background(), insert(1000)) }()
	w.waitQueued(2)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	r := <-marked
	t.Logf("with a failing unit after it: recorded %v, err %v; the failing unit: %v", r.recorded, r.err, <-failing)
	if alone == nil {
		t.Errorf("MarkSentAll of a delivery with no row, alone, told success")
	}
	if r.err == nil {
		t.Errorf("MarkSentAll of a delivery with no row told success, recorded %v (alone it is told %v)", r.recorded, alone)
	}
}

// LockAhead.Take called by a caller that stopped waiting while the unit
// carrying the attempt is still in flight returns nil; when the unit then
// commits, the lock's row is let go, not left held by nobody until it
// expires.
func TestLockAheadTakenInFlightLetsItsLockGo(t *testing.T) {
	t.Parallel()
	w := newGroupCommitWorld(t, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL)`)
	ctx := t.Context()
	unlock2 := w.lockedConn(2)
	a := w.st.LockAhead("d:probe")
	release := w.hold(1)
	flightCtx, cancel := context.WithCancel(ctx)
	flight := make(chan error, 1)
	go func() {
		flight <- w.st.Commit(flightCtx, append([]store.Statement{{SQL: `SELECT pg_advisory_xact_lock(2)`}}, a.Statements()...)...)
	}()
	w.waitQueued(1)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	w.waitLockWaiter(2) // in flight
	cancel()
	t.Logf("caller's Commit: %v", <-flight)
	l := a.Take()
	t.Logf("Take while the unit is in flight: %v", l)
	if err := unlock2(); err != nil {
		t.Fatal(err)
	}
	// Let the batch commit (a unit behind it commits after it).
	if err := w.st.Commit(ctx, insert(1)); err != nil {
		t.Fatal(err)
	}
	var owner string
	var err error
	for range 20 { // a fix may let it go a moment after the commit
		err = w.st.Pool().QueryRow(ctx, `SELECT owner FROM package_locks WHERE name = 'd:probe'`).Scan(&owner)
		if err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("lock row after the unit committed: owner %q, err %v", owner, err)
	if l == nil && err == nil {
		t.Errorf("lock d:probe is held in the database by %s, which no Lock holds or renews: orphaned until it expires", owner)
	}
}

// A failed Scan beside the store's own units: a lock's release
// (UnlockWith) and a delivery's intents (EnsureIntents) in the same batch
// commit and are told so: the release is not reported failed while its
// row is gone, and the intents' caller does not retry into intents that
// are no longer fresh (which would search the destination before a send).
func TestGroupCommitScanFailureLeavesOthersToldTheirCommit(t *testing.T) {
	t.Parallel()
	w := newGroupCommitWorld(t, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL)`)
	ctx := t.Context()
	pkg := onePartPackage(t, w.st, "u1", 1, 1)
	l, err := w.st.Lock(ctx, "d:probe1b")
	if err != nil {
		t.Fatal(err)
	}
	release := w.hold(1)
	unlocked := make(chan error, 1)
	go func() { unlocked <- l.UnlockWith(context.Background(), insert(1)) }()
	w.waitQueued(1)
	intents := make(chan error, 1)
	go func() {
		_, err := w.st.EnsureIntents(context.Background(), pkg, -100, []int{0}, "a")
		intents <- err
	}()
	w.waitQueued(2)
	bad := insert(2)
	bad.SQL += ` RETURNING NULL::int`
	bad.Read = func(rows pgx.Rows) error {
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	badErr := make(chan error, 1)
	go func() { badErr <- w.st.Commit(context.Background(), bad) }()
	w.waitQueued(3)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	uerr, ierr := <-unlocked, <-intents
	t.Logf("UnlockWith: %v", uerr)
	t.Logf("EnsureIntents: %v", ierr)
	t.Logf("the unit whose Read failed to scan: %v", <-badErr)
	var n int
	if err := w.st.Pool().QueryRow(ctx, `SELECT count(*) FROM package_locks WHERE name = 'd:probe1b'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	lost := false
	select {
	case <-l.Lost():
		lost = true
	default:
	}
	t.Logf("lock rows left: %d; Lock lost: %v; gc rows: %v", n, lost, w.rows())
	if uerr != nil && n == 0 {
		t.Errorf("UnlockWith told %v, yet the lock's row was deleted and committed", uerr)
	}
	again, err := w.st.EnsureIntents(ctx, pkg, -100, []int{0}, "a")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("EnsureIntents again: fresh=%v token=%s", again[0].Fresh, again[0].Token)
	if ierr != nil && !again[0].Fresh {
		t.Errorf("EnsureIntents told %v although its intent committed; the retry finds it not fresh", ierr)
	}
}

// A batch refused before it was sent and sent again unit by unit counts
// once in CommitStats: its units once, its time not twice.
func TestGroupCommitRefusedBatchCountsOnce(t *testing.T) {
	t.Parallel()
	st := openConfig(t, store.Config{GroupCommitFlushes: 1, GroupCommitDelay: 300 * time.Millisecond})
	ctx := t.Context()
	if _, err := st.Pool().Exec(ctx, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	before := st.CommitStats()
	slow := store.Statement{SQL: `INSERT INTO gc (k, tx) SELECT $1, txid_current() FROM pg_sleep(0.5)`, Args: []any{1}}
	bad := store.Statement{SQL: `INSERT INTO gc (k, tx) VALUES ($1, txid_current())`, Args: []any{make(chan int)}}
	units := [][]store.Statement{{slow}, {bad}, {insert(3)}}
	errs := make([]error, len(units))
	start := time.Now()
	var wg sync.WaitGroup
	for i, u := range units {
		wg.Go(func() { errs[i] = st.Commit(context.Background(), u...) })
	}
	wg.Wait()
	wall := time.Since(start)
	if errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("told %v; want only the unencodable unit failed", errs)
	}
	// The flusher adds its time as it returns, after telling the units.
	var after store.CommitStats
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if after = st.CommitStats(); after.Units-before.Units >= 3 && after.Flushing > before.Flushing || time.Now().After(deadline) {
			break
		}
	}
	if d := after.Units - before.Units; d != 3 {
		t.Errorf("CommitStats counted %d units for the 3 handed over", d)
	}
	if d := after.Flushing - before.Flushing; d > wall+100*time.Millisecond {
		t.Errorf("CommitStats.Flushing grew by %s in %s of wall time with one flusher", d, wall)
	}
}

// A database that stops answering while pgx prepares a batch (a table
// locked by a migration) fails the batch's units when the group commit's
// bound passes: they are not sent again one by one, each with a bound of
// its own.
func TestGroupCommitPrepareTimeoutFailsTheUnits(t *testing.T) {
	t.Parallel()
	st := openConfig(t, store.Config{GroupCommitFlushes: 1, GroupCommitDelay: 300 * time.Millisecond})
	store.SetFlushTimeout(st, 2*time.Second)
	lockedTable(t, st)
	const n = 4
	errs := make(chan error, n)
	for k := range n {
		go func() { errs <- st.Commit(context.Background(), unpreparedInsert(k)) }()
	}
	// Sent again one by one, they would be told after (n+1) bounds.
	deadline := time.After(5 * time.Second)
	for range n {
		select {
		case err := <-errs:
			if err == nil {
				t.Error("a unit committed under the table's lock")
			}
		case <-deadline:
			t.Fatal("units still held 5 s after they were handed over, with a group commit's bound of 2 s")
		}
	}
}

// A server-side bound (lock_timeout, as an operator may set on the role,
// the database or in the URL) that cancels pgx's prepare of a batch fails
// the batch's units once: they are not sent again one by one, each
// waiting for the lock again.
func TestGroupCommitPrepareLockTimeoutFailsTheUnits(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	st, err := store.Open(t.Context(), store.Config{URL: url + sep + "lock_timeout=1000", GroupCommitFlushes: 1, GroupCommitDelay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	lockedTable(t, st)
	const n = 6
	before := st.CommitStats()
	errs := make(chan error, n)
	start := time.Now()
	for k := range n {
		go func() { errs <- st.Commit(context.Background(), unpreparedInsert(k)) }()
	}
	for range n {
		if err := <-errs; err == nil {
			t.Error("a unit committed under the table's lock")
		}
	}
	took := time.Since(start)
	if d := st.CommitStats().Commits - before.Commits; d > 2 {
		t.Errorf("%d group commits ran for the %d units refused together", d, n)
	}
	if took > 3*time.Second {
		t.Errorf("a prepare refused by the server's lock_timeout (1 s) held the %d units %s: sent again one by one, each waiting for the lock again", n, took.Round(100*time.Millisecond))
	}
}

// A flusher's connection that the server ends while pgx prepares the batch
// (pg_terminate_backend, a server shutting down: a FATAL error) fails the
// batch's units once: they are not sent again one by one, each waiting
// out a group commit's bound behind the same lock.
func TestGroupCommitPrepareOnAnEndedConnectionFailsTheUnits(t *testing.T) {
	t.Parallel()
	st := openConfig(t, store.Config{GroupCommitFlushes: 1, GroupCommitDelay: 300 * time.Millisecond})
	store.SetFlushTimeout(st, 2*time.Second)
	lockedTable(t, st)
	const n = 4
	errs := make(chan error, n)
	start := time.Now()
	for k := range n {
		go func() { errs <- st.Commit(context.Background(), unpreparedInsert(k)) }()
	}
	// Terminate the flusher's backend once it waits for the table's lock.
	go func() {
		for i := 0; i < 100; i++ {
			var pid int
			if err := st.Pool().QueryRow(context.Background(), `SELECT pid FROM pg_locks l WHERE relation = 'gc'::regclass AND NOT granted
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) LIMIT 1`).Scan(&pid); err == nil {
				_, _ = st.Pool().Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	for range n {
		if err := <-errs; err == nil {
			t.Error("a unit committed under the table's lock")
		}
	}
	took := time.Since(start)
	if took > 4*time.Second {
		t.Errorf("a batch whose connection the server terminated at prepare held its %d units %s: sent again one by one, each waiting out a 2 s bound", n, took.Round(100*time.Millisecond))
	}
}

// lockedTable creates table gc in st's database and locks it (ACCESS
// EXCLUSIVE, as a migration would, whatever lock_timeout the connection's
// URL sets) until the test ends: a statement that reads or writes it waits,
// and so does its prepare.
func lockedTable(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := t.Context()
	if _, err := st.Pool().Exec(ctx, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	locker, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(ctx, `BEGIN; SET LOCAL lock_timeout = 0; LOCK TABLE gc IN ACCESS EXCLUSIVE MODE`); err != nil {
		locker.Release()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = locker.Exec(context.Background(), `ROLLBACK`)
		locker.Release()
	})
}

// unpreparedInsert inserts k into gc with a statement text of its own,
// which pgx prepares before it sends the batch.
func unpreparedInsert(k int) store.Statement {
	return store.Statement{SQL: fmt.Sprintf(`INSERT INTO gc (k, tx) VALUES ($1, txid_current()) -- unit %d`, k), Args: []any{k}}
}
