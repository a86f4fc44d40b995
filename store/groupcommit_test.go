package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"stashd/internal/pgtest"
	"stashd/store"
)

// groupCommitWorld is a store with a table gc(k, tx) whose rows record
// the transaction that wrote them, and a way to hold the committer busy.
// Its committer has one flusher, so that holding it holds every unit.
type groupCommitWorld struct {
	t  *testing.T
	st *store.Store
}

func newGroupCommitWorld(t *testing.T, table string) *groupCommitWorld {
	t.Helper()
	st := openConfig(t, store.Config{GroupCommitFlushes: 1})
	if _, err := st.Pool().Exec(t.Context(), table); err != nil {
		t.Fatal(err)
	}
	return &groupCommitWorld{t: t, st: st}
}

// insert is a unit writing key k with its transaction's id.
func insert(k int) store.Statement {
	return store.Statement{SQL: `INSERT INTO gc (k, tx) VALUES ($1, txid_current())`, Args: []any{k}}
}

// hold makes the committer busy with a unit that waits for an advisory
// lock the test holds, and returns a function that lets it go and waits
// for its result.
func (w *groupCommitWorld) hold(key int) (release func() error) {
	w.t.Helper()
	unlock := w.lockedConn(key)
	done := make(chan error, 1)
	go func() {
		done <- w.st.Commit(context.Background(), store.Statement{SQL: `SELECT pg_advisory_xact_lock($1)`, Args: []any{key}})
	}()
	// The committer has it once nobody waits to hand it over.
	w.waitQueued(0)
	w.waitLockWaiter(key)
	return func() error {
		if err := unlock(); err != nil {
			return err
		}
		return <-done
	}
}

// lockedConn takes advisory lock key on a connection of the store's and
// returns what lets it go, with the connection. A test that fails while it
// holds it lets it go before the store closes: the closing store waits for
// every connection, the committer's too, which waits for the lock.
func (w *groupCommitWorld) lockedConn(key int) (unlock func() error) {
	w.t.Helper()
	conn, err := w.st.Pool().Acquire(w.t.Context())
	if err != nil {
		w.t.Fatal(err)
	}
	held := true
	unlock = func() error {
		if !held {
			return nil
		}
		held = false
		defer conn.Release()
		_, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock_all()`)
		return err
	}
	w.t.Cleanup(func() { _ = unlock() })
	if _, err := conn.Exec(w.t.Context(), `SELECT pg_advisory_lock($1)`, key); err != nil {
		w.t.Fatal(err)
	}
	return unlock
}

// waitLockWaiter waits until a session waits for advisory lock key.
func (w *groupCommitWorld) waitLockWaiter(key int) {
	w.t.Helper()
	for range 500 {
		var n int
		// pg_locks is the cluster's: the tests beside this one, each in
		// its own database, take the same keys.
		err := w.st.Pool().QueryRow(w.t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
			AND objid = $1 AND NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, key).Scan(&n)
		if err != nil {
			w.t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.t.Fatal("nobody waits for the advisory lock")
}

// waitQueued waits until n callers wait for the committer.
func (w *groupCommitWorld) waitQueued(n int) {
	w.t.Helper()
	for range 500 {
		if store.GroupCommitQueued(w.st) == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.t.Fatalf("%d callers wait for the committer, want %d", store.GroupCommitQueued(w.st), n)
}

// rows returns the table's rows: key to transaction id.
func (w *groupCommitWorld) rows() map[int]int64 {
	w.t.Helper()
	rows, err := w.st.Pool().Query(w.t.Context(), `SELECT k, tx FROM gc`)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[int]int64{}
	for rows.Next() {
		var k int
		var tx int64
		if err := rows.Scan(&k, &tx); err != nil {
			w.t.Fatal(err)
		}
		out[k] = tx
	}
	if err := rows.Err(); err != nil {
		w.t.Fatal(err)
	}
	return out
}

// commitAll hands each unit to the committer from its own goroutine once
// the committer is held, lets it go once all of them wait, and returns
// their results.
func (w *groupCommitWorld) commitAll(units [][]store.Statement) []error {
	w.t.Helper()
	release := w.hold(1)
	errs := make([]error, len(units))
	var wg sync.WaitGroup
	for i, u := range units {
		wg.Go(func() { errs[i] = w.st.Commit(context.Background(), u...) })
	}
	w.waitQueued(len(units))
	if err := release(); err != nil {
		w.t.Fatal(err)
	}
	wg.Wait()
	return errs
}

// Units handed over by many callers while the committer is busy commit
// together: one transaction, each caller told after it committed.
func TestGroupCommitSharesOneTransaction(t *testing.T) {
	t.Parallel()
	w := newGroupCommitWorld(t, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL)`)
	const n = 40
	txs := make([]int64, n)
	units := make([][]store.Statement, n)
	for i := range units {
		st := insert(i)
		st.SQL += ` RETURNING tx`
		st.Read = func(rows pgx.Rows) error {
			for rows.Next() {
				if err := rows.Scan(&txs[i]); err != nil {
					return err
				}
			}
			return rows.Err()
		}
		units[i] = []store.Statement{st}
	}
	for i, err := range w.commitAll(units) {
		if err != nil {
			t.Fatalf("unit %d: %v", i, err)
		}
	}
	got := w.rows()
	if len(got) != n {
		t.Fatalf("%d rows committed, want %d", len(got), n)
	}
	distinct := map[int64]bool{}
	for k, tx := range got {
		distinct[tx] = true
		if txs[k] != tx {
			t.Errorf("unit %d read transaction %d, its row says %d", k, txs[k], tx)
		}
	}
	if len(distinct) != 1 {
		t.Errorf("%d units committed in %d transactions, want 1", n, len(distinct))
	}
}

// A unit whose statement fails is told its error and leaves nothing
// behind; the units before and after it in the same batch commit.
func TestGroupCommitFailingUnitSparesTheOthers(t *testing.T) {
	t.Parallel()
	w := newGroupCommitWorld(t, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL);
		INSERT INTO gc VALUES (1000, 0)`)
	const n = 12
	units := make([][]store.Statement, n)
	for i := range units {
		units[i] = []store.Statement{insert(i)}
	}
	// A unit of two statements whose second fails: its first is undone.
	units[3] = []store.Statement{insert(3), insert(1000)}
	units[7] = []store.Statement{insert(1000)}
	units[n-1] = []store.Statement{insert(n - 1), insert(1000)} // the last one
	errs := w.commitAll(units)
	for i, err := range errs {
		var pgErr *pgconn.PgError
		switch i {
		case 3, 7, n - 1:
			if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
				t.Errorf("unit %d: %v, want its unique violation", i, err)
			}
		default:
			if err != nil {
				t.Errorf("unit %d: %v", i, err)
			}
		}
	}
	got := w.rows()
	distinct := map[int64]bool{}
	for i := range n {
		tx, ok := got[i]
		failed := i == 3 || i == 7 || i == n-1
		if ok == failed {
			t.Errorf("row %d committed: %v, want %v", i, ok, !failed)
		}
		if ok {
			distinct[tx] = true
		}
	}
	if len(distinct) != 1 {
		t.Errorf("the units that succeeded committed in %d transactions, want 1", len(distinct))
	}
	// CommitStats counts every unit, and the three told their error
	// (besides the units of the table's setup, none).
	if cs := w.st.CommitStats(); cs.Units < n || cs.Failed != 3 || cs.Commits < 1 || cs.Flushing <= 0 {
		t.Errorf("CommitStats %+v; want at least %d units in at least one commit, 3 failed, some time", cs, n)
	}
}

// A COMMIT that fails (a deferred constraint) fails every unit it held,
// and none of their rows stays.
func TestGroupCommitFailedCommitFailsEveryUnit(t *testing.T) {
	t.Parallel()
	w := newGroupCommitWorld(t, `CREATE TABLE gc (k int, tx bigint NOT NULL,
		CONSTRAINT gc_k UNIQUE (k) DEFERRABLE INITIALLY DEFERRED)`)
	const n = 10
	units := make([][]store.Statement, n)
	for i := range units {
		units[i] = []store.Statement{insert(i)}
	}
	units[n-1] = []store.Statement{insert(0)} // legal until COMMIT checks it
	for i, err := range w.commitAll(units) {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			t.Errorf("unit %d: %v, want the COMMIT's unique violation", i, err)
		}
	}
	if got := w.rows(); len(got) != 0 {
		t.Errorf("%d rows committed, want none", len(got))
	}
	// The committer goes on: the next unit commits.
	if err := w.st.Commit(t.Context(), insert(99)); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.rows()[99]; !ok {
		t.Error("a unit after the failed commit did not commit")
	}
}

// A caller whose context ends stops waiting at once. A unit not yet
// taken never runs; a unit in flight runs with its batch, which commits
// whole for the others.
func TestGroupCommitCancelledCaller(t *testing.T) {
	t.Parallel()
	w := newGroupCommitWorld(t, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL)`)
	ctx := t.Context()

	// Cancelled while queued behind a busy committer.
	release := w.hold(1)
	queuedCtx, cancelQueued := context.WithCancel(ctx)
	queued := make(chan error, 1)
	go func() { queued <- w.st.Commit(queuedCtx, insert(1)) }()
	other := make(chan error, 1)
	go func() { other <- w.st.Commit(ctx, insert(2)) }()
	w.waitQueued(2)
	cancelQueued()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued caller cancelled: %v, want context.Canceled", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	if got := w.rows(); len(got) != 1 || got[2] == 0 {
		t.Fatalf("rows %v, want only key 2's", got)
	}

	// Cancelled while its own unit is in flight (waiting for a lock the
	// test holds), with another unit in the same batch.
	unlock2 := w.lockedConn(2)
	release = w.hold(1)
	flightCtx, cancelFlight := context.WithCancel(ctx)
	flight := make(chan error, 1)
	go func() {
		flight <- w.st.Commit(flightCtx, store.Statement{SQL: `SELECT pg_advisory_xact_lock(2)`}, insert(3))
	}()
	go func() { other <- w.st.Commit(ctx, insert(4)) }()
	w.waitQueued(2)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	w.waitLockWaiter(2) // the batch is in flight
	cancelFlight()
	select {
	case err := <-flight:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("caller cancelled in flight: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled caller still waits for its batch")
	}
	if err := unlock2(); err != nil {
		t.Fatal(err)
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	got := w.rows()
	if got[3] == 0 || got[3] != got[4] {
		t.Errorf("rows %v: the batch in flight did not commit whole (keys 3 and 4 in one transaction)", got)
	}
}

// A unit handed to a closed store fails with ErrStoreClosed.
func TestGroupCommitAfterClose(t *testing.T) {
	t.Parallel()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(t.Context(), store.Statement{SQL: `SELECT 1`}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := st.Commit(t.Context(), store.Statement{SQL: `SELECT 1`}); !errors.Is(err, store.ErrStoreClosed) {
		t.Fatalf("commit after close: %v, want ErrStoreClosed", err)
	}
}

// Out-of-range group commit settings are refused when the store opens.
func TestGroupCommitSettingsChecked(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	for _, cfg := range []store.Config{{GroupCommitSize: -1}, {GroupCommitSize: store.MaxGroupCommitSize + 1},
		{GroupCommitFlushes: -1}, {GroupCommitFlushes: store.MaxGroupCommitFlushes + 1}, {GroupCommitDelay: -time.Millisecond}} {
		cfg.URL = url
		if st, err := store.Open(t.Context(), cfg); err == nil {
			st.Close()
			t.Errorf("Open with group commit size %d, flushes %d, delay %s accepted", cfg.GroupCommitSize, cfg.GroupCommitFlushes, cfg.GroupCommitDelay)
		}
	}
}

// A unit alone in its transaction goes without a savepoint: when one of
// its statements fails, the whole transaction is undone, the unit is told
// the error, and the committer goes on.
func TestGroupCommitLoneUnitWithoutSavepoint(t *testing.T) {
	t.Parallel()
	tr := &statementTracer{}
	st := openConfig(t, store.Config{GroupCommitFlushes: 1, Tracer: tr})
	ctx := t.Context()
	if _, err := st.Pool().Exec(ctx, `CREATE TABLE gc (k int PRIMARY KEY, tx bigint NOT NULL);
		INSERT INTO gc VALUES (1000, 0)`); err != nil {
		t.Fatal(err)
	}
	w := &groupCommitWorld{t: t, st: st}
	tr.reset()
	var pgErr *pgconn.PgError
	if err := st.Commit(ctx, insert(1), insert(1000)); !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("lone unit whose second statement fails: %v, want its unique violation", err)
	}
	if err := st.Commit(ctx, insert(2)); err != nil {
		t.Fatalf("the unit after a failed one: %v", err)
	}
	if got := w.rows(); len(got) != 2 || got[2] == 0 {
		t.Errorf("rows %v, want keys 1000 and 2 only (the failed unit's first row undone)", got)
	}
	if n := tr.count("SAVEPOINT u"); n != 0 {
		t.Errorf("two lone units sent %d savepoints, want none", n)
	}
	// Units sharing a transaction still get one each.
	tr.reset()
	w.commitAll([][]store.Statement{{insert(3)}, {insert(4)}})
	if n := tr.count("SAVEPOINT u"); n != 2 {
		t.Errorf("two units in one transaction sent %d savepoints, want 2", n)
	}
}

// statementTracer records the statements of the batches sent.
type statementTracer struct {
	batchTracer
	mu  sync.Mutex
	sql []string
}

func (s *statementTracer) reset() {
	s.mu.Lock()
	s.sql = nil
	s.mu.Unlock()
}

func (s *statementTracer) count(sql string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.sql {
		if q == sql {
			n++
		}
	}
	return n
}

func (s *statementTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.mu.Lock()
	s.sql = append(s.sql, d.SQL)
	s.mu.Unlock()
}
