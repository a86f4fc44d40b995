package store

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// This file holds the dedup lookups of ingest, each as a Statement that
// reads its answer into the caller's variable, so that several ride in one
// round trip (LockThen sends them with the attempt to take a lock), and as
// a method that runs one alone.

// Found is the answer of a lookup for a package: its id, when OK.
type Found struct {
	ID int64
	OK bool
}

// Document is the answer of LookMessageDocument.
type Document struct {
	Outcome Outcome
	// UniqueID is the file unique id of the document the message was
	// handled with ("" for a message recorded without one).
	UniqueID string
	// EditDate is the message's edit date when it was handled with that
	// document (zero: never edited, or not recorded).
	EditDate time.Time
	// SetKey, FileName and TopicID are the set the message was recorded
	// a part of (its outcome part_pending), its document's name and its
	// forum topic.
	SetKey, FileName string
	TopicID          int64
	OK               bool
}

// Stale reports whether m, a view of the message carrying another
// document than the recorded one, is older than the record: its session
// had not heard of the edit the record saw. Edit dates are in seconds,
// so two edits within one may look alike; then neither is Stale nor
// Newer, and only Telegram can tell.
func (d Document) Stale(m tg.Message) bool { return m.EditDate.Before(d.EditDate) }

// Newer reports whether m, a view of the message, comes from a later
// edit than the record.
func (d Document) Newer(m tg.Message) bool { return m.EditDate.After(d.EditDate) }

// LookMessageDocument reads whether the source key is in the catalogue
// (dedup layer 1), with which outcome and for which document, into out.
func LookMessageDocument(key tg.MessageKey, out *Document) Statement {
	return Statement{SQL: `SELECT outcome, unique_id, edit_date, set_key, file_name, topic_id FROM source_messages WHERE chat_id = $1 AND message_id = $2`,
		Args: []any{int64(key.Chat), int64(key.Message)},
		Read: func(rows pgx.Rows) error {
			*out = Document{}
			for rows.Next() {
				var o string
				var edited *time.Time
				if err := rows.Scan(&o, &out.UniqueID, &edited, &out.SetKey, &out.FileName, &out.TopicID); err != nil {
					return err
				}
				if edited != nil {
					out.EditDate = edited.UTC()
				}
				out.Outcome, out.OK = Outcome(o), true
			}
			return rows.Err()
		}}
}

// LookPackageByUniqueIDs reads the package whose parts are exactly the
// files with these Telegram unique ids, in this order (dedup layer 2),
// into out.
func LookPackageByUniqueIDs(uniqueIDs []string, out *Found) Statement {
	return Statement{SQL: `SELECT r.unique_id, r.package_id, r.idx, p.part_count
		FROM remote_files r JOIN packages p ON p.id = r.package_id WHERE r.unique_id = ANY($1)`,
		Args: []any{uniqueIDs},
		Read: func(rows pgx.Rows) error {
			*out = Found{}
			hits := map[string]fileHit{}
			for rows.Next() {
				var u string
				var h fileHit
				if err := rows.Scan(&u, &h.pkg, &h.idx, &h.parts); err != nil {
					return err
				}
				hits[u] = h
			}
			if err := rows.Err(); err != nil {
				return err
			}
			*out = packageOfFiles(uniqueIDs, hits)
			return nil
		}}
}

// fileHit is a remote_files row with its package's part count.
type fileHit struct {
	pkg   int64
	idx   int
	parts int
}

// packageOfFiles is the package whose parts are exactly uniqueIDs in
// this order, from the rows of those files (hits, by unique id).
func packageOfFiles(uniqueIDs []string, hits map[string]fileHit) Found {
	if len(uniqueIDs) == 0 {
		return Found{}
	}
	var pkg int64
	for i, u := range uniqueIDs {
		h, ok := hits[u]
		if !ok || h.idx != i || h.parts != len(uniqueIDs) || (pkg != 0 && h.pkg != pkg) {
			return Found{}
		}
		pkg = h.pkg
	}
	return Found{ID: pkg, OK: true}
}

// LookPackageHolding reads the package that holds every one of these
// files (Telegram unique ids) among its parts or identical re-uploads,
// when they all belong to one package, into out (see PackageHolding).
func LookPackageHolding(uniqueIDs []string, out *Found) Statement {
	ids := make([]string, len(uniqueIDs))
	for i, u := range uniqueIDs {
		ids[i] = text(u)
	}
	// unique_id is remote_files' key: one row per known file.
	return Statement{SQL: `SELECT count(*) = (SELECT count(DISTINCT u) FROM unnest($1::text[]) u),
			coalesce(array_agg(DISTINCT package_id), '{}')
		FROM remote_files WHERE unique_id = ANY($1)`,
		Args: []any{ids},
		Read: func(rows pgx.Rows) error {
			*out = Found{}
			var all bool
			var pkgs []int64
			if err := scanOne(rows, &all, &pkgs); err != nil {
				return err
			}
			*out = packageHolding(uniqueIDs, all, pkgs)
			return nil
		}}
}

// packageHolding is LookPackageHolding's answer: all says every file is
// known, pkgs are the packages that hold them.
func packageHolding(uniqueIDs []string, all bool, pkgs []int64) Found {
	if all && len(pkgs) == 1 && len(uniqueIDs) > 0 {
		return Found{ID: pkgs[0], OK: true}
	}
	return Found{}
}

// LookMessageAndFiles is LookMessageDocument, LookPackageByUniqueIDs and
// LookPackageHolding in one statement, the looks that ride with layer 3's
// lock: the server spends about as much on a statement as on what these
// read. It reads one snapshot, taken after the statements before it in
// its transaction (the lock's).
func LookMessageAndFiles(key tg.MessageKey, uniqueIDs []string, doc *Document, again, holding *Found) Statement {
	cleaned := make([]string, len(uniqueIDs))
	for i, u := range uniqueIDs {
		cleaned[i] = text(u)
	}
	return Statement{SQL: `SELECT m.outcome, m.unique_id, m.edit_date, m.set_key, m.file_name, m.topic_id,
			f.ids, f.pkgs, f.idxs, f.parts, h.known, h.pkgs
		FROM (SELECT) one
		LEFT JOIN source_messages m ON m.chat_id = $1 AND m.message_id = $2
		CROSS JOIN (SELECT coalesce(array_agg(r.unique_id), '{}') AS ids, coalesce(array_agg(r.package_id), '{}') AS pkgs,
				coalesce(array_agg(r.idx), '{}') AS idxs, coalesce(array_agg(p.part_count), '{}') AS parts
			FROM remote_files r JOIN packages p ON p.id = r.package_id WHERE r.unique_id = ANY($3)) f
		CROSS JOIN (SELECT count(*) = (SELECT count(DISTINCT u) FROM unnest($4::text[]) u) AS known,
				coalesce(array_agg(DISTINCT package_id), '{}') AS pkgs
			FROM remote_files WHERE unique_id = ANY($4)) h`,
		Args: []any{int64(key.Chat), int64(key.Message), uniqueIDs, cleaned},
		Read: func(rows pgx.Rows) error {
			*doc, *again, *holding = Document{}, Found{}, Found{}
			var outcome, uid, setKey, name *string
			var edited *time.Time
			var topic *int64
			var ids []string
			var pkgs, holders []int64
			var idxs, parts []int32
			var all bool
			if err := scanOne(rows, &outcome, &uid, &edited, &setKey, &name, &topic, &ids, &pkgs, &idxs, &parts, &all, &holders); err != nil {
				return err
			}
			if outcome != nil {
				*doc = Document{Outcome: Outcome(*outcome), UniqueID: *uid, SetKey: *setKey, FileName: *name, TopicID: *topic, OK: true}
				if edited != nil {
					doc.EditDate = edited.UTC()
				}
			}
			// One aggregate over the same rows: the arrays are as long.
			hits := make(map[string]fileHit, len(ids))
			for i, u := range ids {
				hits[u] = fileHit{pkg: pkgs[i], idx: int(idxs[i]), parts: int(parts[i])}
			}
			*again = packageOfFiles(uniqueIDs, hits)
			*holding = packageHolding(uniqueIDs, all, holders)
			return nil
		}}
}

// LookSetPending reads the file names of the parts of set setKey of the
// chat's topic (0: none) that are recorded and waiting for the rest of
// their set, into out.
func LookSetPending(chat tg.ChatID, topic int64, setKey string, out *[]string) Statement {
	return Statement{SQL: `SELECT coalesce(array_agg(file_name), '{}') FROM source_messages
			WHERE chat_id = $1 AND topic_id = $2 AND set_key = $3 AND outcome = 'part_pending'`,
		Args: []any{int64(chat), topic, setKey},
		Read: func(rows pgx.Rows) error { return scanOne(rows, out) }}
}

// LookPackageByHash reads the package with this content hash (dedup layer
// 4) into out.
func LookPackageByHash(hash []byte, out *Found) Statement {
	return lookID(`SELECT id FROM packages WHERE content_hash = $1`, out, hash)
}

// LookPackageBySignature reads the first package catalogued, other than
// except, whose content signature is sig (a repack) into out: the first
// whose signature stands on its bytes (NewPackage.SignatureChecked) when
// one does, and whether it does into checked (read only when out.OK).
func LookPackageBySignature(sig []byte, except int64, out *Found, checked *bool) Statement {
	return lookIDWith(`SELECT id, sig_checked FROM packages WHERE content_sig = $1 AND id <> $2
		ORDER BY sig_checked DESC, id LIMIT 1`, out, []any{checked}, sig, except)
}

// lookID is a lookup of at most one id.
func lookID(sql string, out *Found, args ...any) Statement {
	return lookIDWith(sql, out, nil, args...)
}

// lookIDWith is lookID for a row that holds more columns after the id,
// scanned into also (written only when a row is found).
func lookIDWith(sql string, out *Found, also []any, args ...any) Statement {
	return Statement{SQL: sql, Args: args, Read: func(rows pgx.Rows) error {
		*out = Found{}
		for rows.Next() {
			if err := rows.Scan(append([]any{&out.ID}, also...)...); err != nil {
				return err
			}
			out.OK = true
		}
		return rows.Err()
	}}
}

// keyPlansSQL makes the statements after it in a transaction run on their
// prepared statement's generic plan, a plan that reads every table by
// one of its indexes where one serves. The catalogue's hot statements
// take arrays (= ANY($1), unnest($1)), and for those PostgreSQL's default
// (plan_cache_mode auto) plans every execution anew, which costs more than
// running it. A generic plan is made once a connection, from the
// statistics of that moment, and kept: made on a catalogue still empty (a
// new deployment, a first backfill) it reads small tables whole (a hash
// join over every package, every lock row), and goes on reading them whole
// as they grow, until an ANALYZE happens to replan it. Every lookup here
// is by key, so seq scans are put off (enable_seqscan: a table no index
// serves is still read whole). Search statements are not prepared and keep
// the defaults.
const keyPlansSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)`

// Look runs reads (Look… statements, and what rides with them: a lock
// attempt) as one transaction, on generic plans by key, in one round trip: BEGIN,
// keyPlansSQL, the statements, COMMIT. A statement that fails undoes
// the others and its error is returned; else the first failure of a Read
// is.
func (s *Store) Look(ctx context.Context, stmts ...Statement) error {
	return look(ctx, s.pool, stmts)
}

// batchSender is a pool or one of its connections.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// look is Look on q.
func look(ctx context.Context, q batchSender, stmts []Statement) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(keyPlansSQL)
	for _, st := range stmts {
		b.Queue(st.SQL, st.Args...)
	}
	b.Queue("COMMIT")
	br := q.SendBatch(ctx, b)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	var rerr error
	for _, st := range stmts {
		re, err := readStatement(br, st)
		if err != nil {
			return err
		}
		rerr = cmp.Or(rerr, re)
	}
	if _, err := br.Exec(); err != nil { // COMMIT
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	return rerr
}

// look runs one lookup.
func (s *Store) look(ctx context.Context, st Statement) error {
	rows, err := s.pool.Query(ctx, st.SQL, st.Args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := st.Read(rows); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// MessageHandled reports whether the source key is already in the catalogue
// (dedup layer 1), and with which outcome.
func (s *Store) MessageHandled(ctx context.Context, key tg.MessageKey) (Outcome, bool, error) {
	var d Document
	if err := s.look(ctx, LookMessageDocument(key, &d)); err != nil {
		return "", false, fmt.Errorf("look up message %s: %w", key, err)
	}
	return d.Outcome, d.OK, nil
}

// PackageByUniqueIDs returns the package whose parts are exactly the files
// with these Telegram unique ids, in this order (dedup layer 2).
func (s *Store) PackageByUniqueIDs(ctx context.Context, uniqueIDs []string) (int64, bool, error) {
	if len(uniqueIDs) == 0 {
		return 0, false, nil
	}
	var f Found
	if err := s.look(ctx, LookPackageByUniqueIDs(uniqueIDs, &f)); err != nil {
		return 0, false, fmt.Errorf("look up unique ids: %w", err)
	}
	return f.ID, f.OK, nil
}

// PackageHolding returns the package that holds every one of these files
// (Telegram unique ids) among its parts or identical re-uploads, when they
// all belong to one package: some of a known package's parts gathered
// again without the rest (a set or album re-gathered short after a
// restart, or a forward of some of an album's documents).
func (s *Store) PackageHolding(ctx context.Context, uniqueIDs []string) (int64, bool, error) {
	if len(uniqueIDs) == 0 {
		return 0, false, nil
	}
	var f Found
	if err := s.look(ctx, LookPackageHolding(uniqueIDs, &f)); err != nil {
		return 0, false, fmt.Errorf("look up the package holding %d files: %w", len(uniqueIDs), err)
	}
	return f.ID, f.OK, nil
}
