package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DatabaseIdentity is the database server the catalogue lives on: its
// system identifier (the same on a primary and its standbys) and timeline
// (a promoted standby starts a new one).
type DatabaseIdentity struct {
	SystemIdentifier int64
	Timeline         int64
}

func (id DatabaseIdentity) String() string {
	return fmt.Sprintf("system %d timeline %d", id.SystemIdentifier, id.Timeline)
}

// same reports whether id and o name the same server: the same timeline,
// and the same system identifier where both are known (0: a role that may
// not read it).
func (id DatabaseIdentity) same(o DatabaseIdentity) bool {
	return id.Timeline == o.Timeline &&
		(id.SystemIdentifier == 0 || o.SystemIdentifier == 0 || id.SystemIdentifier == o.SystemIdentifier)
}

// ServerIdentity reads the identity of the server the store is connected
// to now. A role without the right to read the control file
// (pg_control_system needs the pg_monitor role or a superuser on managed
// services) still reads the timeline, which a promoted standby changes: its
// identity has system identifier 0 (unknown), and a server restored into
// another cluster on the same timeline is told only by the catalogue's
// table OID or the destinations. A standby (no current WAL position) gets
// ok false: there is nothing to compare.
func (s *Store) ServerIdentity(ctx context.Context) (id DatabaseIdentity, ok bool, err error) {
	return readIdentity(ctx, s.pool)
}

// identitySQL reads the server's system identifier and its current
// timeline: the timeline of the WAL file being written (a promoted
// standby switches at once; the control file's checkpoint follows only
// at the next checkpoint).
const identitySQL = `SELECT (SELECT system_identifier FROM pg_control_system()), ` + timelineSQL

// timelineSQL reads the current timeline alone: any role may.
const timelineSQL = `('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint`

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func readIdentity(ctx context.Context, q querier) (id DatabaseIdentity, ok bool, err error) {
	err = q.QueryRow(ctx, identitySQL).Scan(&id.SystemIdentifier, &id.Timeline)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		// No right to read the control file: the timeline still tells
		// a promoted standby.
		id.SystemIdentifier = 0
		err = q.QueryRow(ctx, `SELECT `+timelineSQL).Scan(&id.Timeline)
	}
	if errors.As(err, &pe) && (pe.Code == "42501" || pe.Code == "55000") {
		// A standby (no current WAL position): nothing to compare.
		return id, false, nil
	}
	if err != nil {
		return id, false, fmt.Errorf("read the database server's identity: %w", err)
	}
	return id, true, nil
}

// serverWatch remembers the identity of the server the pool's first
// connection reached, and notices when a later connection reaches another
// (a promoted standby, a restored cluster).
type serverWatch struct {
	mu      sync.Mutex
	known   DatabaseIdentity
	seen    bool
	changed bool
	// left is the server this process ran on before a change that no
	// CheckIdentity has compared yet (moved): another instance may have
	// recorded the new server first, and this one has rewound work of its
	// own to take back.
	left  DatabaseIdentity
	moved bool
	// writes: the store writes (not read-only), so a change of server
	// moves the package ids past those the old one may have given out;
	// skip: that move is still to be made (it failed on the connection
	// that noticed the change, and the next one tries again).
	writes, skip bool
	// skipErr is the last failure of that move not yet reported
	// (IDMoveFailure).
	skipErr error
	// catalogue is the OID of the catalogue's database_identity table at
	// this process's last successful CheckIdentity (0: none yet). Another
	// one means the tables were created anew since (a dump restored in
	// place), whichever instance's check recorded them first.
	catalogue int64
	// era counts, from 1, the changes of server this process noticed
	// (and again when a check takes one up) and the rewinds its checks
	// named: an Era read before one may hold what the catalogue has since
	// forgotten.
	era uint64
}

// Era is the catalogue as this process knew it at a moment: a source's
// state read then (Source.Era), and what a listener or a scan learns from
// it, was learnt of that catalogue. A change of server, or a rewind a
// CheckIdentity names, ends the era: the catalogue may have forgotten
// messages handled in it, and a watermark learnt in it would carry the
// source past them. The zero Era is none: a write without one is judged
// by the moment it is made.
type Era struct{ n uint64 }

// Era returns the era this process is in.
func (s *Store) Era() Era {
	s.server.mu.Lock()
	defer s.server.mu.Unlock()
	return Era{s.server.era}
}

type eraKey struct{}

// WithEra returns a context whose writes of a source's state
// (SaveSourceState, AdvanceWatermark) hold what was learnt in era e: they
// are refused with ErrRewound once it ended.
func WithEra(ctx context.Context, e Era) context.Context {
	return context.WithValue(ctx, eraKey{}, e)
}

// ErrRewound refuses a source's state learnt in an era that ended (see
// Era): the catalogue changed server or rewound since, and the listener
// and catch-up take the source's state again from the catalogue.
var ErrRewound = errors.New("the catalogue rewound since this source's state was read")

// sourceWrite is the table OID a write of a source's state compares
// (catalogueCurrent), or why it may not be made: a change of server not
// checked yet (ErrRewindUnchecked), or an era in ctx that ended
// (ErrRewound). Asked with the write's connection in hand, so a new
// connection to another server has told of the change (afterConnect).
func (w *serverWatch) sourceWrite(ctx context.Context) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.moved {
		return 0, ErrRewindUnchecked
	}
	if e, ok := ctx.Value(eraKey{}).(Era); ok && e.n != 0 && e.n != w.era {
		return 0, ErrRewound
	}
	return w.catalogue, nil
}

// checkedCatalogue returns the table OID this process last checked.
func (w *serverWatch) checkedCatalogue() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.catalogue
}

// idGap is how far package ids move on when a connection reaches another
// server: a promoted standby lacks the packages the old primary catalogued
// in its last moments, and its sequence would give their ids out again,
// while instances still hold them (a due delivery read before the
// failover) and would take the new package for the old one.
const idGap = 1 << 20

// skipIDsSQL moves the package ids idGap past the sequence's position,
// under a transaction-scoped advisory lock taken first: two instances
// moving at once after a failover move one after the other, so the later
// never sets the sequence back below ids the earlier gave out since.
const skipIDsSQL = `SELECT setval(pg_get_serial_sequence('packages', 'id'),
	nextval(pg_get_serial_sequence('packages', 'id')) + $1)
	FROM (SELECT pg_advisory_xact_lock(hashtext('stashd: package ids move on'))) AS moving`

// takeLeft returns the server this process left for another since the
// last call, if it did.
func (w *serverWatch) takeLeft() (DatabaseIdentity, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	left, moved := w.left, w.moved
	if moved {
		// From here the era refuses what was learnt before the change,
		// as moved did (sourceWrite).
		w.era++
	}
	w.moved = false
	return left, moved
}

// afterConnect reads a new connection's server identity. It never fails
// the connection: a server it cannot read is no evidence of a change.
func (w *serverWatch) afterConnect(ctx context.Context, conn *pgx.Conn) error {
	id, ok, err := readIdentity(ctx, conn)
	if err != nil || !ok {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.seen:
		w.known, w.seen = id, true
		// A process starting on a promoted standby never saw the old
		// primary, but another instance that ran there may still hold
		// the ids it gave out: the catalogue's record of another server
		// moves them on too (each starting process until a check records
		// the new server).
		var rec DatabaseIdentity
		err := conn.QueryRow(ctx, `SELECT coalesce(system_identifier, 0), timeline FROM database_identity
			WHERE timeline IS NOT NULL`).Scan(&rec.SystemIdentifier, &rec.Timeline)
		if err == nil && !rec.same(id) {
			w.skip = w.writes
		}
	case !id.same(w.known):
		if !w.moved {
			w.left, w.moved = w.known, true
		}
		w.known, w.changed = id, true
		w.era++
		w.skip = w.writes
	}
	if w.skip {
		// Under the lock: a connection opened meanwhile waits, and
		// writes no package before the ids moved on. A server that
		// refuses (read-only) keeps its ids until a connection to one
		// that takes writes moves them.
		_, err := conn.Exec(ctx, skipIDsSQL, idGap)
		w.skip = err != nil
		w.moveDone(err)
	}
	return nil
}

// moveDone records how a move of the package ids ended: moved, an earlier
// refusal no longer holds; refused other than by a read-only server, the
// failure is IDMoveFailure's to tell. w.mu is held.
func (w *serverWatch) moveDone(err error) {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		w.skipErr = nil
	case !(errors.As(err, &pgErr) && pgErr.Code == readOnlyTransaction):
		w.skipErr = err
	}
}

// moveIDsOn moves the package ids on after a rewind this process's check
// named: a dump restored in place keeps the server, so no new connection
// moved them (afterConnect), and the restored sequence would give out
// again the ids of packages catalogued since the dump, which links and
// this process's work in flight may still name. A failure is told by
// IDMoveFailure; it does not fail the check, whose reconciliations are
// asked for already.
func (s *Store) moveIDsOn(ctx context.Context) {
	_, err := s.pool.Exec(ctx, skipIDsSQL, idGap)
	s.server.mu.Lock()
	defer s.server.mu.Unlock()
	s.server.moveDone(err)
}

// readOnlyTransaction is SQLSTATE read_only_sql_transaction: a standby,
// or a server set read-only, refused a write.
const readOnlyTransaction = "25006"

// IDMoveFailure returns, once, the last failure to move the package ids
// on after a change of server (a role without UPDATE on their sequence),
// nil when there is none to tell or a later move went through. A server refusing writes is no failure:
// the ids move once one takes them. Until they move, a new package may
// take an id another instance still holds for a package the old server
// catalogued.
func (s *Store) IDMoveFailure() error {
	s.server.mu.Lock()
	defer s.server.mu.Unlock()
	err := s.server.skipErr
	s.server.skipErr = nil
	if err == nil {
		return nil
	}
	return fmt.Errorf("move the package ids on after the change of database server: %w", err)
}

// catalogueChecked is an SQL condition: the catalogue's recorded table OID
// is its table's own, or none is recorded yet. It is false after a dump
// restored in place until CheckIdentity names the restore (and records the
// new OID); the server's identity, and the connections, stayed the same.
const catalogueChecked = `NOT EXISTS (SELECT 1 FROM database_identity
	WHERE catalogue_oid IS DISTINCT FROM 'database_identity'::regclass::oid::bigint)`

// catalogueCurrent is the condition under which a source's state is written
// (SaveSourceState, AdvanceWatermark) and a delivery goes
// (LookReconcilePending): catalogueChecked, and the catalogue's tables are
// those this process last checked ($n: their OID, 0 before its first
// check). Another instance's check may have recorded a dump restored in
// place first; this process still holds what it read from the old tables,
// and its destinations were not reconciled, until its own check names the
// restore.
func catalogueCurrent(n int) string {
	return catalogueChecked + fmt.Sprintf(` AND ($%d::bigint = 0 OR 'database_identity'::regclass::oid::bigint = $%d)`, n, n)
}

// ErrRewindUnchecked refuses a source's watermark or state: the process's
// connections reached another database server (a promoted standby) that no
// CheckIdentity has compared yet. The listener and catch-up hold what they
// learnt on the old server; written now it would carry the watermarks past
// the messages the new server lacks, and the rewind's reload of the
// sources would read them back from there, so those messages would never
// be read again.
var ErrRewindUnchecked = errors.New("the database server changed and no identity check has compared it yet")

// unchecked reports whether a connection reached another server than the
// one before it, and no CheckIdentity has compared the change yet.
func (w *serverWatch) unchecked() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.moved
}

// ServerChanged reports, once, that a connection reached another database
// server than the one before it (another timeline or cluster): the
// catalogue may have rewound, and CheckIdentity should run before anything
// is sent. A CheckIdentity that fails before naming the change makes it
// report the change again.
func (s *Store) ServerChanged() bool {
	s.server.mu.Lock()
	defer s.server.mu.Unlock()
	changed := s.server.changed
	s.server.changed = false
	return changed
}
