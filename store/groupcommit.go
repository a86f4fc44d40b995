package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// This file is the group committer: the writes of many callers (the
// ingest workers of every account) share one transaction and one round
// trip, so the commit rate (an fsync each) and the round trips stop
// bounding how many packages a second the catalogue takes.
//
// A unit of work is a list of statements that must commit together. The
// committer's free flusher takes the units waiting, up to GroupCommitSize,
// and sends them as one pipelined batch:
//
//	BEGIN; <keyPlansSQL>; SAVEPOINT u; <unit 1>; RELEASE u; SAVEPOINT u; <unit 2>; RELEASE u; …; COMMIT
//
// A batch of one unit goes without its savepoint (BEGIN; <unit>; COMMIT):
// its failure rolls back the whole transaction, which held nothing else.
//
// A statement that fails aborts the rest of the batch: its unit is told
// its error, the transaction is rolled back to that unit's savepoint (one
// more round trip; the units before it keep their work) and the units
// after it are sent again in the next batch of the same transaction. A
// unit is told it succeeded only once COMMIT has; a COMMIT that fails
// fails every unit it held, and their callers retry as after any failed
// write. A batch that pgx refuses before sending any of it (an argument
// it cannot encode, a statement the server cannot prepare) is sent again
// one unit a transaction, so that only the unit at fault fails; a refusal
// that is the connection's or the bound's fails the units at once. A Read
// that fails, its Scan included, is its unit's failure alone: the server
// ran the statement, and the batch goes on to its COMMIT.
//
// Flushing: up to GroupCommitFlushes batches are in flight at once, each
// on its own connection (PostgreSQL then shares one WAL flush between
// their commits). A flusher flushes as soon as it is free; units that
// arrive while every flusher is busy wait for the next free one, so under
// load batches form by themselves, and a lone unit pays no added latency.
// GroupCommitDelay, when set, makes a flusher wait that long for more
// units before flushing fewer than GroupCommitSize.

// MaxGroupCommitSize is the most units one group commit holds, and the
// default of Config.GroupCommitSize. PostgreSQL keeps the ids of up to 64
// subtransactions (one per unit's savepoint) in shared memory; more would
// make every snapshot taken meanwhile look them up on disk.
const MaxGroupCommitSize = 64

// DefaultGroupCommitFlushes is how many group commits may be in flight at
// once when Config.GroupCommitFlushes is zero.
const DefaultGroupCommitFlushes = 2

// MaxGroupCommitFlushes bounds Config.GroupCommitFlushes.
const MaxGroupCommitFlushes = 16

// ErrStoreClosed is the error of work handed to a closed Store.
var ErrStoreClosed = errors.New("store closed")

// Statement is one statement of a unit of group-committed work.
type Statement struct {
	SQL  string
	Args []any
	// Read, when set, reads the statement's result rows (and, once they
	// are read, rows.CommandTag()). It runs before the transaction
	// commits: what it saw holds only if the unit's Commit returns nil.
	// Nil discards the result.
	Read func(pgx.Rows) error
	// Committed, when set, runs in the committer once the statement's
	// unit committed, before its caller is told (a lock's release, a lock
	// taken ahead).
	Committed func()
	// Flushing, when set, runs in the committer as the group commit that
	// carries the statement starts, before its transaction begins, with
	// that time (a lock taken ahead counts its life from it).
	Flushing func(at time.Time)
	// Serial makes the group commit that carries the statement take the
	// catalogue's serial lock as it begins (serialLockSQL): such commits
	// run one at a time, across every instance, so that the statement
	// sees what every other such commit wrote before its own, or is seen
	// by it (a package's links to those it contains or is contained in).
	Serial bool
}

// serialLockSQL takes the lock of Statement.Serial, held to the end of
// the transaction. It is taken first, while the transaction holds no
// other lock, so that it never closes a cycle of waits.
const serialLockSQL = `SELECT pg_advisory_xact_lock(hashtext('stashd: serial group commits'))`

// unit is one caller's statements and where its result goes.
type unit struct {
	ctx   context.Context
	stmts []Statement
	// done receives the unit's result once; it is buffered so that the
	// committer never waits for a caller that stopped waiting.
	done chan error
	// readErr is the failure of one of its statements' Read.
	readErr error
}

// committer runs group commits on its flushers' goroutines.
type committer struct {
	pool    *pgxpool.Pool
	size    int
	delay   time.Duration
	timeout time.Duration // flushTimeout
	in      chan *unit
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	// queued counts the callers waiting for the committer to take their
	// unit (tests wait for it).
	queued atomic.Int64
	// The counts CommitStats reports.
	commits, units, failed, flushing atomic.Int64
}

// CommitStats are what the group committer did since the store opened.
type CommitStats struct {
	// Commits counts the group commits run (committed or not), Units the
	// units they held, Failed the units told an error.
	Commits, Units, Failed int64
	// Flushing is the time spent running group commits, from taking a
	// connection to the answer of COMMIT.
	Flushing time.Duration
}

// CommitStats returns the group committer's counts (zero on a read-only
// store).
func (s *Store) CommitStats() CommitStats {
	c := s.commits
	if c == nil {
		return CommitStats{}
	}
	return CommitStats{Commits: c.commits.Load(), Units: c.units.Load(), Failed: c.failed.Load(),
		Flushing: time.Duration(c.flushing.Load())}
}

func newCommitter(pool *pgxpool.Pool, size, flushers int, delay time.Duration) *committer {
	c := &committer{pool: pool, size: size, delay: delay, timeout: flushTimeout, in: make(chan *unit), stop: make(chan struct{})}
	for range flushers {
		c.wg.Go(c.run)
	}
	return c
}

// close stops the committer once the flushes in flight have ended; work
// handed to it afterwards fails with ErrStoreClosed.
func (c *committer) close() {
	c.once.Do(func() {
		close(c.stop)
		c.wg.Wait()
	})
}

// Commit runs stmts in the next group commit, in order, as one unit (all
// or none of them), and returns once that transaction committed or the
// unit failed. If ctx ends first it returns ctx's error at once: a unit
// not yet taken into a batch is then never run, a unit in flight runs and
// commits or not with its batch (the caller cannot know which, as after
// a connection lost at COMMIT, so the statements must be safe to run
// again).
func (s *Store) Commit(ctx context.Context, stmts ...Statement) error {
	if s.commits == nil {
		return errors.New("group commit on a read-only store")
	}
	u := &unit{ctx: ctx, stmts: stmts, done: make(chan error, 1)}
	s.commits.queued.Add(1)
	select {
	case s.commits.in <- u:
		s.commits.queued.Add(-1)
	case <-ctx.Done():
		s.commits.queued.Add(-1)
		return ctx.Err()
	case <-s.commits.stop:
		s.commits.queued.Add(-1)
		return ErrStoreClosed
	}
	select {
	case err := <-u.done:
		return err
	case <-ctx.Done():
		select {
		case err := <-u.done: // told at the same moment: the result stands
			return err
		default:
			return ctx.Err()
		}
	}
}

// run is one flusher.
func (c *committer) run() {
	for {
		var first *unit
		select {
		case <-c.stop:
			return
		case first = <-c.in:
		}
		units := c.gather(first)
		c.flush(units)
	}
}

// gather returns first and the units waiting behind it, up to size: those
// already waiting, and with a delay those that arrive within it.
func (c *committer) gather(first *unit) []*unit {
	units := []*unit{first}
	var deadline <-chan time.Time
	if c.delay > 0 {
		t := time.NewTimer(c.delay)
		defer t.Stop()
		deadline = t.C
	}
	for len(units) < c.size {
		if deadline == nil {
			select {
			case u := <-c.in:
				units = append(units, u)
				continue
			default:
				return units
			}
		}
		select {
		case u := <-c.in:
			units = append(units, u)
		case <-deadline:
			return units
		case <-c.stop:
			return units
		}
	}
	return units
}

// flushTimeout bounds one group commit: a database that stops answering
// fails the units (their callers retry) instead of holding them for ever.
const flushTimeout = time.Minute

// flush runs units in one transaction and tells each its result.
func (c *committer) flush(units []*unit) {
	live := units[:0:0]
	for _, u := range units {
		if err := u.ctx.Err(); err != nil {
			u.done <- err // never run: its caller is gone
			continue
		}
		live = append(live, u)
	}
	if len(live) == 0 {
		return
	}
	start := time.Now()
	for _, u := range live {
		for _, st := range u.stmts {
			if st.Flushing != nil {
				st.Flushing(start)
			}
		}
	}
	c.commits.Add(1)
	c.units.Add(int64(len(live)))
	counted := true // false: sent again unit by unit, which count themselves
	defer func() {
		if counted {
			c.flushing.Add(int64(time.Since(start)))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		c.fail(live, fmt.Errorf("group commit: %w", err))
		return
	}
	// A connection left inside a transaction (an error that broke off a
	// batch) is closed by the pool on release, not reused.
	defer func() {
		if conn != nil {
			conn.Release()
		}
	}()
	ok, err := runUnits(ctx, conn.Conn(), live)
	c.failed.Add(int64(len(live) - len(ok))) // told their statement's error
	var pre pgx.ErrPreprocessingBatch
	if err != nil && len(ok) > 1 && errors.As(err, &pre) && ctx.Err() == nil && unitsRefusal(err) {
		// Refused before any of it ran, by one unit's argument or
		// statement (not a connection lost, a database that stopped
		// answering, or a lock or statement timeout: those fail the
		// units, as any failed flush). Each unit alone, so that only
		// that one fails.
		conn.Release()
		conn = nil
		c.commits.Add(-1)
		c.units.Add(-int64(len(live)))
		counted = false
		for _, u := range ok {
			c.flush([]*unit{u})
		}
		return
	}
	if err != nil {
		c.fail(ok, err)
		return
	}
	for _, u := range ok {
		for _, st := range u.stmts {
			if st.Committed != nil {
				st.Committed()
			}
		}
		if u.readErr != nil {
			c.failed.Add(1)
		}
		u.done <- u.readErr
	}
}

// unitsRefusal reports whether err, a batch's refusal before it was sent,
// is a statement's or an argument's: the server's syntax or access rule
// (class 42), a data exception (22) or a feature it lacks (0A), or an
// argument pgx cannot encode; not the connection's failure (the network,
// the server gone or ending the session) nor the server's state (a lock
// or statement timeout, a shutdown), which any unit would meet again.
func unitsRefusal(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		if pg.Severity == "FATAL" || pg.Severity == "PANIC" || len(pg.Code) < 2 {
			return false
		}
		switch pg.Code[:2] {
		case "42", "22", "0A":
			return true
		}
		return false
	}
	var ne net.Error
	return !errors.As(err, &ne) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !pgconn.Timeout(err)
}

func (c *committer) fail(units []*unit, err error) {
	c.failed.Add(int64(len(units)))
	for _, u := range units {
		u.done <- err
	}
}

// runUnits runs units in one transaction on conn and commits it. A unit
// whose statement fails is told its error at once. It returns the units
// not told yet; err is nil when their transaction committed.
func runUnits(ctx context.Context, conn *pgx.Conn, units []*unit) (rest []*unit, err error) {
	var ok []*unit
	begin := true
	for {
		// A transaction of one unit needs no savepoint: its failure
		// undoes nothing another unit did.
		savepoints := !begin || len(units) > 1
		b := &pgx.Batch{}
		serial := false
		if begin {
			b.Queue("BEGIN")
			b.Queue(keyPlansSQL)
			if serial = anySerial(units); serial {
				b.Queue(serialLockSQL)
			}
		}
		for _, u := range units {
			if savepoints {
				b.Queue("SAVEPOINT u")
			}
			for _, st := range u.stmts {
				b.Queue(st.SQL, st.Args...)
			}
			if savepoints {
				b.Queue("RELEASE SAVEPOINT u")
			}
		}
		b.Queue("COMMIT")
		failed, ferr, err := readBatch(ctx, conn, b, begin, serial, savepoints, units)
		switch {
		case err != nil:
			// Not a unit's own failure: the connection, or the
			// transaction itself (its COMMIT). None of it holds.
			return append(ok, units...), fmt.Errorf("group commit: %w", err)
		case failed < 0:
			return append(ok, units...), nil
		}
		units[failed].done <- ferr
		if !savepoints {
			// The lone unit's transaction is undone as a whole. A
			// ROLLBACK that fails leaves the connection in its
			// transaction, and the pool closes it on release.
			_, _ = conn.Exec(ctx, "ROLLBACK", pgx.QueryExecModeSimpleProtocol)
			return nil, nil
		}
		ok = append(ok, units[:failed]...)
		units = units[failed+1:]
		begin = false
		// Undo the failed unit alone. In the simple protocol: the
		// extended one would prepare it first, which an aborted
		// transaction refuses.
		if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT u; RELEASE SAVEPOINT u", pgx.QueryExecModeSimpleProtocol); err != nil {
			return append(ok, units...), fmt.Errorf("group commit: %w", err)
		}
	}
}

// anySerial reports whether a statement of units is Serial.
func anySerial(units []*unit) bool {
	for _, u := range units {
		for _, st := range u.stmts {
			if st.Serial {
				return true
			}
		}
	}
	return false
}

// readBatch sends b and reads its results. failed is the index in units
// of the unit one of whose statements failed (ferr its error), -1 when
// the batch ran to its COMMIT; err is any other failure (BEGIN, the
// savepoints, COMMIT, the connection). A unit's Read that fails without
// a statement failing is not the server's failure: the batch goes on and
// commits (the unit's statements must be safe to run again anyway), and
// the unit is told the reader's error.
func readBatch(ctx context.Context, conn *pgx.Conn, b *pgx.Batch, begin, serial, savepoints bool, units []*unit) (failed int, ferr, err error) {
	br := conn.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && failed < 0 && cerr != nil {
			err = cerr
		}
	}()
	exec := func() error {
		_, err := br.Exec()
		return err
	}
	if begin {
		opening := 2 // BEGIN, keyPlansSQL
		if serial {
			opening++ // serialLockSQL
		}
		for range opening {
			if err := exec(); err != nil {
				return -1, nil, err
			}
		}
	}
	for i, u := range units {
		if savepoints {
			if err := exec(); err != nil { // SAVEPOINT
				return -1, nil, err
			}
		}
		for _, st := range u.stmts {
			rerr, err := readStatement(br, st)
			if err != nil {
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) {
					return -1, nil, err
				}
				return i, err, nil
			}
			if rerr != nil && u.readErr == nil {
				u.readErr = rerr
			}
		}
		if savepoints {
			if err := exec(); err != nil { // RELEASE
				return -1, nil, err
			}
		}
	}
	if err := exec(); err != nil { // COMMIT
		return -1, nil, err
	}
	return -1, nil, nil
}

// readStatement reads one statement's result with its Read: rerr is the
// reader's own failure, err the statement's.
func readStatement(br pgx.BatchResults, st Statement) (rerr, err error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	if st.Read != nil {
		rr := &readerRows{Rows: rows}
		rerr = st.Read(rr)
		if rerr == nil {
			rerr = rr.err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return rerr, nil
}

// readerRows are the rows a Read sees: a Scan that fails is the reader's
// failure, not the statement's, and leaves the batch's results readable
// (pgx's own Scan fails the whole batch, whose COMMIT the server runs).
type readerRows struct {
	pgx.Rows
	err error
}

func (r *readerRows) Scan(dest ...any) error {
	err := pgx.ScanRow(r.Conn().TypeMap(), r.FieldDescriptions(), r.RawValues(), dest...)
	if err != nil && r.err == nil {
		r.err = err
	}
	return err
}
