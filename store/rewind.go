package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// CheckIdentity compares the server the store is connected to with the one
// the catalogue last recorded, and records the current one. It returns
// the reason the catalogue may have rewound ("" when it may not): another
// system identifier (a restore into another cluster), another timeline
// (a promoted standby), or another OID of the catalogue's own table (a
// dump restored, into any database: pg_restore and psql create the tables
// anew, while the server's identity stays the same in the same cluster). A
// row recorded before the catalogue noted its table's OID (an upgrade, or
// an older dump restored) is taken for a restore too: nothing else tells
// the two apart. The first check of a catalogue records the server and
// reports nothing. A process whose connections moved to another server
// since its last check is told too when another instance recorded that
// server first: it ran on the old one, and its own work there may have
// rewound. A role that cannot read the control file compares the
// timeline and the table's OID; a standby, the table's OID alone.
//
// A rewind named asks, in the same commit as the record, for every
// destination the catalogue records a delivery or a found copy in, and
// every one of dests, to be reconciled (RequestReconcile): once the next
// check names nothing, those destinations are held already. Checks take
// turns, so another instance's check that follows finds them held.
func (s *Store) CheckIdentity(ctx context.Context, dests ...tg.ChatID) (reason string, err error) {
	var left DatabaseIdentity
	var moved bool
	defer func() {
		if err == nil {
			return
		}
		// The change this check did not get to name is told again, to
		// ServerChanged as to the next check.
		s.server.mu.Lock()
		if moved && !s.server.moved {
			s.server.left, s.server.moved = left, true
		}
		if s.server.moved {
			s.server.changed = true
		}
		s.server.mu.Unlock()
	}()
	now, ok, err := s.ServerIdentity(ctx)
	if err != nil {
		return "", err
	}
	left, moved = s.server.takeLeft()
	checked := s.server.checkedCatalogue()
	ids := chatIDs(dests)
	var table int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		reason = ""
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('stashd: database identity'))`); err != nil {
			return fmt.Errorf("wait for the database identity: %w", err)
		}
		var sysid, timeline, oid *int64
		err := tx.QueryRow(ctx, `SELECT system_identifier, timeline, catalogue_oid, 'database_identity'::regclass::oid::bigint
			FROM database_identity`).Scan(&sysid, &timeline, &oid, &table)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// The catalogue's first check: nothing to compare.
			if err := tx.QueryRow(ctx, `SELECT 'database_identity'::regclass::oid::bigint`).Scan(&table); err != nil {
				return fmt.Errorf("read the catalogue's table: %w", err)
			}
		case err != nil:
			return fmt.Errorf("read the recorded database identity: %w", err)
		case ok && sysid != nil && now.SystemIdentifier != 0 && *sysid != now.SystemIdentifier:
			reason = fmt.Sprintf("database server changed (system identifier %d, was %d): restored from a backup?",
				now.SystemIdentifier, *sysid)
		case ok && timeline != nil && *timeline != now.Timeline:
			reason = fmt.Sprintf("database timeline changed (%d, was %d): a standby was promoted", now.Timeline, *timeline)
		case oid == nil:
			reason = "the catalogue's tables were not recorded yet (an upgrade, or a restore of an older dump)"
		case *oid != table:
			reason = fmt.Sprintf("the catalogue's tables were created anew (table OID %d, was %d): restored from a dump?", table, *oid)
		case checked != 0 && checked != table:
			reason = fmt.Sprintf("the catalogue's tables were created anew under this process (table OID %d, was %d); "+
				"another instance recorded them first", table, checked)
		case ok && moved && !left.same(now):
			reason = fmt.Sprintf("database server changed under this process (%s, was %s); another instance recorded it first", now, left)
		}
		if reason != "" {
			if _, err := tx.Exec(ctx, `INSERT INTO reconciles (destination_chat_id, reason)
				SELECT d, $2 FROM (SELECT destination_chat_id FROM deliveries
					UNION SELECT destination_chat_id FROM destination_copies
					UNION SELECT unnest($1::bigint[])) AS t (d) ORDER BY d`+reconcileAgain, ids, reason); err != nil {
				return fmt.Errorf("request reconciliation of every destination: %w", err)
			}
		}
		if ok {
			// A system identifier the role may not read (0) keeps the one
			// recorded.
			_, err = tx.Exec(ctx, `INSERT INTO database_identity (system_identifier, timeline, catalogue_oid)
				VALUES (NULLIF($1::bigint, 0), $2, 'database_identity'::regclass::oid::bigint)
				ON CONFLICT (singleton) DO UPDATE SET
					system_identifier = coalesce(excluded.system_identifier, database_identity.system_identifier),
					timeline = $2, catalogue_oid = excluded.catalogue_oid, checked_at = now()`,
				now.SystemIdentifier, now.Timeline)
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO database_identity (catalogue_oid)
				VALUES ('database_identity'::regclass::oid::bigint)
				ON CONFLICT (singleton) DO UPDATE SET catalogue_oid = excluded.catalogue_oid, checked_at = now()`)
		}
		if err != nil {
			return fmt.Errorf("record the database identity: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	s.server.mu.Lock()
	s.server.catalogue = table
	if reason != "" {
		s.server.era++
	}
	s.server.mu.Unlock()
	if reason != "" {
		s.moveIDsOn(ctx)
	}
	return reason, nil
}

// reconcileAgain ends an INSERT INTO reconciles: a request already
// waiting keeps its first reason, a finished one waits again. Its rows
// come in destination order, so two requests for overlapping destinations
// at once wait on each other's rows in the same order, never in a cycle.
const reconcileAgain = `
	ON CONFLICT (destination_chat_id) DO UPDATE SET reason = CASE
			WHEN reconciles.finished_at IS NULL THEN reconciles.reason ELSE excluded.reason END,
		requested_at = CASE WHEN reconciles.finished_at IS NULL THEN reconciles.requested_at ELSE now() END,
		started_at = CASE WHEN reconciles.finished_at IS NULL THEN reconciles.started_at END,
		pages = CASE WHEN reconciles.finished_at IS NULL THEN reconciles.pages ELSE 0 END,
		copies = CASE WHEN reconciles.finished_at IS NULL THEN reconciles.copies ELSE 0 END,
		recovered = CASE WHEN reconciles.finished_at IS NULL THEN reconciles.recovered ELSE 0 END,
		last_error = CASE WHEN reconciles.finished_at IS NULL THEN reconciles.last_error ELSE '' END,
		gave_up = false, finished_at = NULL`

// RequestReconcile asks for every destination in dests to be paged for
// copies the catalogue has forgotten before anything is sent to it again.
// A request already waiting keeps its first reason.
func (s *Store) RequestReconcile(ctx context.Context, dests []tg.ChatID, reason string) error {
	ids := chatIDs(dests)
	_, err := s.pool.Exec(ctx, `INSERT INTO reconciles (destination_chat_id, reason)
			SELECT DISTINCT d, $2 FROM unnest($1::bigint[]) AS d ORDER BY d`+reconcileAgain, ids, reason)
	if err != nil {
		return fmt.Errorf("request reconciliation of %d destinations: %w", len(dests), err)
	}
	return nil
}

// Reconcile is a destination's reconciliation.
type Reconcile struct {
	Destination tg.ChatID `json:"destination"`
	Reason      string    `json:"reason"`
	RequestedAt time.Time `json:"requested_at"`
	// StartedAt and FinishedAt are zero until then.
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Pages of history read, copies of stashd's found, and delivery
	// records rebuilt from them, in the current (or last) run.
	Pages     int `json:"pages"`
	Copies    int `json:"copies"`
	Recovered int `json:"recovered"`
	// RecoveredTotal adds up every run's Recovered.
	RecoveredTotal int64  `json:"recovered_total"`
	LastError      string `json:"last_error,omitempty"`
	// GaveUp: finished without being read, for LastError's reason (the
	// destination's history could not be read).
	GaveUp bool `json:"gave_up,omitempty"`
}

// Reconciles returns every destination's reconciliation, waiting ones
// first.
func (s *Store) Reconciles(ctx context.Context) ([]Reconcile, error) {
	rows, err := s.pool.Query(ctx, `SELECT destination_chat_id, reason, requested_at, started_at, finished_at,
			pages, copies, recovered, recovered_total, last_error, gave_up
		FROM reconciles ORDER BY finished_at IS NOT NULL, destination_chat_id`)
	if err != nil {
		return nil, fmt.Errorf("list reconciliations: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Reconcile, error) {
		var r Reconcile
		var started, finished *time.Time
		err := row.Scan((*int64)(&r.Destination), &r.Reason, &r.RequestedAt, &started, &finished,
			&r.Pages, &r.Copies, &r.Recovered, &r.RecoveredTotal, &r.LastError, &r.GaveUp)
		if started != nil {
			r.StartedAt = *started
		}
		if finished != nil {
			r.FinishedAt = *finished
		}
		return r, err
	})
}

// ReconcilePending reports whether dest waits for a reconciliation: nothing
// may be sent to it until one has finished. A catalogue restored from a
// dump that this process's identity check has not named yet waits too (see
// LookReconcilePending).
func (s *Store) ReconcilePending(ctx context.Context, dest tg.ChatID) (bool, error) {
	var pending bool
	if err := s.look(ctx, s.LookReconcilePending(dest, &pending)); err != nil {
		return false, fmt.Errorf("check reconciliation of %d: %w", dest, err)
	}
	return pending, nil
}

// LookReconcilePending reads whether a reconciliation of dest waits to
// finish (ReconcilePending as a Statement) into out. So does a catalogue
// whose tables are not those this process last checked, or whose recorded
// table OID is not its table's own: a dump restored in place under a
// running process, which keeps its connections to the same server, so
// nothing but the process's next identity check (CheckIdentity, which asks
// for the reconciliations) would tell it, seconds later, after the
// deliveries the dump still queues had gone a second time. Another
// instance's check recording the restored tables first does not let this
// process's deliveries go: that check asked only for the destinations it
// knew.
func (s *Store) LookReconcilePending(dest tg.ChatID, out *bool) Statement {
	return Statement{SQL: `SELECT EXISTS (SELECT 1 FROM reconciles
			WHERE destination_chat_id = $1 AND finished_at IS NULL)
		OR NOT (` + catalogueCurrent(2) + `)`, Args: []any{int64(dest), s.server.checkedCatalogue()},
		Read: func(rows pgx.Rows) error { return scanOne(rows, out) }}
}

// ReconcileAsked reports whether a reconciliation of dest was ever asked
// for: the catalogue rewound (or `stashd reconcile` asked), and may have
// forgotten what was made in dest since its backup, its forum topics
// among them.
func (s *Store) ReconcileAsked(ctx context.Context, dest tg.ChatID) (bool, error) {
	var asked bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM reconciles WHERE destination_chat_id = $1)`,
		int64(dest)).Scan(&asked)
	if err != nil {
		return false, fmt.Errorf("look up reconciliations of %d: %w", dest, err)
	}
	return asked, nil
}

// StartReconcile marks dest's waiting reconciliation as started and counts
// its progress from zero (a run cut short starts over).
func (s *Store) StartReconcile(ctx context.Context, dest tg.ChatID) error {
	_, err := s.pool.Exec(ctx, `UPDATE reconciles SET started_at = now(), pages = 0, copies = 0, recovered = 0
		WHERE destination_chat_id = $1 AND finished_at IS NULL`, int64(dest))
	if err != nil {
		return fmt.Errorf("start reconciliation of %d: %w", dest, err)
	}
	return nil
}

// ReconcileProgress adds one page of history, with the copies found on it
// and the delivery records rebuilt from them, to dest's reconciliation.
func (s *Store) ReconcileProgress(ctx context.Context, dest tg.ChatID, copies, recovered int) error {
	_, err := s.pool.Exec(ctx, `UPDATE reconciles SET pages = pages + 1, copies = copies + $2,
			recovered = recovered + $3, recovered_total = recovered_total + $3
		WHERE destination_chat_id = $1`, int64(dest), copies, recovered)
	if err != nil {
		return fmt.Errorf("record reconciliation progress of %d: %w", dest, err)
	}
	return nil
}

// FinishReconcile ends dest's reconciliation: sends to it resume. A run
// that failed records its error and stays waiting.
func (s *Store) FinishReconcile(ctx context.Context, dest tg.ChatID, runErr error) error {
	var err error
	if runErr != nil {
		_, err = s.pool.Exec(ctx, `UPDATE reconciles SET last_error = $2 WHERE destination_chat_id = $1`,
			int64(dest), runErr.Error())
	} else {
		_, err = s.pool.Exec(ctx, `UPDATE reconciles SET finished_at = now(), last_error = ''
			WHERE destination_chat_id = $1 AND finished_at IS NULL`, int64(dest))
	}
	if err != nil {
		return fmt.Errorf("finish reconciliation of %d: %w", dest, err)
	}
	return nil
}

// CopyFound is a copy of a part that a destination holds: its message, the
// delivery token its caption carries, and its file's unique id.
type CopyFound struct {
	Destination tg.ChatID
	Message     tg.MessageID
	Token       string
	UniqueID    string
}

// CopyOutcome is what RecordCopy made of a copy found in a destination.
type CopyOutcome int

// Copy outcomes.
const (
	// CopyKnown: a delivery was recorded as sent with this very message,
	// or this very message is the copy kept for its file.
	CopyKnown CopyOutcome = iota
	// CopySecond: the delivery was recorded with another message, or
	// another message is the copy kept for its file: this one is a second
	// copy of the part, not a lost record.
	CopySecond
	// CopyMarked: the delivery's intent was recorded, its send was not (a
	// crash between the two, or a rewind): it is now marked sent.
	CopyMarked
	// CopyKept: no delivery row carries the token (lost with a rewind):
	// the copy is kept for FoundCopy.
	CopyKept
	// CopyIgnored: no row carries the token and the message carries no
	// file to match a part by.
	CopyIgnored
)

// Recovered reports whether the outcome rebuilt a record the catalogue
// had lost.
func (o CopyOutcome) Recovered() bool { return o == CopyMarked || o == CopyKept }

// CopyRecord is what the catalogue makes of a copy found in a
// destination.
type CopyRecord struct {
	Outcome CopyOutcome
	// Recorded is the message the catalogue records for the copy's part:
	// the copy's own (CopyKnown, CopyMarked, CopyKept), another
	// (CopySecond), or 0 when it records none the copy could be told a
	// second copy of (CopyIgnored; another package's copy of the same
	// file; a record another session made meanwhile).
	Recorded tg.MessageID
	// ByFile: no delivery row carries the copy's token, and the part is
	// recorded by its file (destination_copies, FoundCopy).
	ByFile bool
	// Rebuilt: the record naming Recorded was rebuilt by a reconciliation
	// (a delivery's recovered_at, or a copy kept by file), not written
	// after its send.
	Rebuilt bool
}

// ClassifyCopy tells what RecordCopy would make of a copy found in a
// destination, without writing anything: CopyMarked and CopyKept mean the
// catalogue lacks its record. A copy is a second copy (CopySecond) when
// the delivery its token names is recorded with another message, or, that
// delivery's row lost, when another message carrying the same token is
// kept for its file.
func (s *Store) ClassifyCopy(ctx context.Context, c CopyFound) (CopyRecord, error) {
	var sentAs *int64
	var state string
	var rebuilt bool
	err := s.pool.QueryRow(ctx, `SELECT state, dest_message_id, recovered_at IS NOT NULL FROM deliveries
		WHERE token = $1 AND destination_chat_id = $2`, c.Token, int64(c.Destination)).Scan(&state, &sentAs, &rebuilt)
	switch {
	case err == nil && state == string(DeliverySent) && sentAs != nil && *sentAs == int64(c.Message):
		return CopyRecord{Outcome: CopyKnown, Recorded: c.Message, Rebuilt: rebuilt}, nil
	case err == nil && state == string(DeliverySent) && sentAs != nil:
		return CopyRecord{Outcome: CopySecond, Recorded: tg.MessageID(*sentAs), Rebuilt: rebuilt}, nil
	case err == nil:
		return CopyRecord{Outcome: CopyMarked, Recorded: c.Message}, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return CopyRecord{}, fmt.Errorf("look up the copy of token %s: %w", c.Token, err)
	case c.UniqueID == "":
		return CopyRecord{Outcome: CopyIgnored}, nil
	}
	var kept int64
	var token string
	err = s.pool.QueryRow(ctx, `SELECT dest_message_id, token FROM destination_copies
		WHERE destination_chat_id = $1 AND unique_id = $2`, int64(c.Destination), c.UniqueID).Scan(&kept, &token)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return CopyRecord{Outcome: CopyKept, Recorded: c.Message, ByFile: true}, nil
	case err != nil:
		return CopyRecord{}, fmt.Errorf("look up the copy %d in %d: %w", c.Message, c.Destination, err)
	case kept == int64(c.Message):
		return CopyRecord{Outcome: CopyKnown, Recorded: c.Message, ByFile: true, Rebuilt: true}, nil
	case token != c.Token:
		// Another delivery of the same file: another package shares it
		// (a set re-posted with one volume changed is a package of its
		// own). The file keeps one copy; this one is not its second.
		return CopyRecord{Outcome: CopyKnown, ByFile: true}, nil
	}
	return CopyRecord{Outcome: CopySecond, Recorded: tg.MessageID(kept), ByFile: true, Rebuilt: true}, nil
}

// RecordCopy records a copy found in a destination. A delivery row with
// its token is marked sent with it; without one (the row was lost with the
// rewind), the copy is kept so that a later delivery of the same file to
// the destination is recorded from it instead of being sent again. A copy
// kept already is CopyKnown; a second copy (see ClassifyCopy) is
// CopySecond.
func (s *Store) RecordCopy(ctx context.Context, c CopyFound) (CopyRecord, error) {
	rec, err := s.ClassifyCopy(ctx, c)
	if err != nil {
		return CopyRecord{}, err
	}
	switch rec.Outcome {
	case CopyMarked:
		marked, err := s.markSentByToken(ctx, c.Token, c.Destination, c.Message, "", true)
		if err != nil {
			return CopyRecord{}, err
		}
		if !marked {
			return CopyRecord{Outcome: CopySecond}, nil // sent meanwhile, by another
		}
	case CopyKept:
		tag, err := s.pool.Exec(ctx, `INSERT INTO destination_copies (destination_chat_id, unique_id, dest_message_id, token)
			VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, int64(c.Destination), c.UniqueID, int64(c.Message), c.Token)
		if err != nil {
			return CopyRecord{}, fmt.Errorf("record the copy %d in %d: %w", c.Message, c.Destination, err)
		}
		if tag.RowsAffected() == 0 {
			return CopyRecord{Outcome: CopyKnown, ByFile: true}, nil // kept meanwhile, by another
		}
	}
	return rec, nil
}

// KeptCopy returns the copy kept in dest for the file with uniqueID
// (RecordCopy, after its delivery's row was lost), when its caption
// carried token.
func (s *Store) KeptCopy(ctx context.Context, dest tg.ChatID, uniqueID, token string) (tg.MessageID, bool, error) {
	var msg int64
	err := s.pool.QueryRow(ctx, `SELECT dest_message_id FROM destination_copies
		WHERE destination_chat_id = $1 AND unique_id = $2 AND token = $3`, int64(dest), uniqueID, token).Scan(&msg)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("look up the copy kept of token %s in %d: %w", token, dest, err)
	}
	return tg.MessageID(msg), true, nil
}

// RecordOlderCopy makes c, an older copy of a part than newer, the copy
// the catalogue records for it in place of newer (a record made from
// newer by RecordCopy, by its file when byFile): the oldest copy is the
// part's delivery, the one readers' links point at. It reports whether the
// record named newer and now names c.
func (s *Store) RecordOlderCopy(ctx context.Context, c CopyFound, byFile bool, newer tg.MessageID) (bool, error) {
	fa, fe := s.fenceArgs(ctx)
	if byFile {
		// A delivery the send path recorded from the kept copy (a fresh
		// intent finding it, FoundCopy) moves with it.
		var moved bool
		err := s.pool.QueryRow(ctx, `WITH kept AS (
				UPDATE destination_copies SET dest_message_id = $3
				WHERE destination_chat_id = $1 AND unique_id = $2 AND dest_message_id = $4 AND token = $5
				RETURNING 1),
			recorded AS (
				UPDATE deliveries SET dest_message_id = $3, fence_account = $6, fence_epoch = $7
				WHERE destination_chat_id = $1 AND dest_message_id = $4 AND state = 'sent' AND EXISTS (SELECT FROM kept)
				RETURNING 1)
			SELECT EXISTS (SELECT FROM kept)`,
			int64(c.Destination), c.UniqueID, int64(c.Message), int64(newer), c.Token, fa, fe).Scan(&moved)
		if err != nil {
			return false, fmt.Errorf("record the older copy %d in %d: %w", c.Message.ServerID(), c.Destination, fenced(ctx, err))
		}
		return moved, nil
	}
	tag, err := s.pool.Exec(ctx, `UPDATE deliveries SET dest_message_id = $3, fence_account = $5, fence_epoch = $6
		WHERE token = $1 AND destination_chat_id = $2 AND state = 'sent' AND dest_message_id = $4`,
		c.Token, int64(c.Destination), int64(c.Message), int64(newer), fa, fe)
	if err != nil {
		return false, fmt.Errorf("record the older copy %d of token %s in %d: %w", c.Message.ServerID(), c.Token, c.Destination, fenced(ctx, err))
	}
	return tag.RowsAffected() == 1, nil
}

// FoundCopy returns the message of a copy found in dest of part idx of
// package pkg (any file known to carry it), recorded by RecordCopy when
// the catalogue had lost its delivery.
func (s *Store) FoundCopy(ctx context.Context, pkg int64, idx int, dest tg.ChatID) (tg.MessageID, bool, error) {
	var msg int64
	err := s.pool.QueryRow(ctx, `SELECT c.dest_message_id FROM destination_copies c
			JOIN remote_files r ON r.unique_id = c.unique_id
		WHERE c.destination_chat_id = $1 AND r.package_id = $2 AND r.idx = $3
		ORDER BY c.dest_message_id LIMIT 1`, int64(dest), pkg, idx).Scan(&msg)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("look up a found copy of package %d part %d in %d: %w", pkg, idx, dest, err)
	}
	return tg.MessageID(msg), true, nil
}

// RecoveredDeliveries adds up the delivery records every reconciliation
// rebuilt.
func (s *Store) RecoveredDeliveries(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(recovered_total), 0) FROM reconciles`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count recovered deliveries: %w", err)
	}
	return n, nil
}

// DeliveredDestinations returns every destination the catalogue records a
// delivery or a found copy in.
func (s *Store) DeliveredDestinations(ctx context.Context) ([]tg.ChatID, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT destination_chat_id FROM deliveries
		UNION SELECT destination_chat_id FROM destination_copies ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("list destinations: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[tg.ChatID])
}

// GiveUpReconcile finishes dest's reconciliation without having read it,
// recording why (GaveUp on the row): its deliveries are no longer held.
func (s *Store) GiveUpReconcile(ctx context.Context, dest tg.ChatID, reason error) error {
	_, err := s.pool.Exec(ctx, `UPDATE reconciles SET finished_at = now(), last_error = $2, gave_up = true
		WHERE destination_chat_id = $1 AND finished_at IS NULL`, int64(dest), reason.Error())
	if err != nil {
		return fmt.Errorf("give up the reconciliation of %d: %w", dest, err)
	}
	return nil
}

// NewestRecorded returns the newest message the catalogue knows in dest:
// a delivery's message or a copy found there; 0 when it knows none.
func (s *Store) NewestRecorded(ctx context.Context, dest tg.ChatID) (tg.MessageID, error) {
	var id tg.MessageID
	err := s.pool.QueryRow(ctx, `SELECT greatest(
		(SELECT max(dest_message_id) FROM deliveries WHERE destination_chat_id = $1 AND dest_message_id IS NOT NULL),
		(SELECT max(dest_message_id) FROM destination_copies WHERE destination_chat_id = $1), 0)`, dest).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("newest recorded message in %d: %w", dest, err)
	}
	return id, nil
}

// ResetConnections closes every pooled connection; new statements open
// new ones. After the catalogue was restored underneath a running process
// (pg_restore --clean recreates the tables), statements prepared on the
// old connections are stale.
func (s *Store) ResetConnections() {
	s.pool.Reset()
	if s.leasePool != nil {
		s.leasePool.Reset()
	}
}
