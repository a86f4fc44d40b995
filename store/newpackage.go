package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"stashd/tg"
)

// NewPackage is everything ingest writes when it catalogues a package:
// the package with its parts, listing, verification and content
// signature, its links, the deliveries it owes, the source messages that
// brought it and the locks taken for it. CataloguePackage commits it as
// one unit of a group commit.
type NewPackage struct {
	Package      Package
	Parts        []Part
	Files        []FileEntry
	Verification Verification
	// Signature is the content signature of the package's listing (see
	// archive.ContentSignature); nil when it has none. With one, the
	// package is linked to the packages it contains or is contained in.
	Signature []byte
	// SignatureChecked says the signature stands on the archive's bytes
	// (archive.SignatureChecked), not only on the CRCs its headers claim.
	SignatureChecked bool
	// RepackOf, when not 0, is the package this one repacks (same
	// signature, catalogued first): the two are linked.
	RepackOf int64
	// Deliveries are queued for the package (PackageID is filled in), each
	// unless one to its destination is queued already or the package has
	// been sent there in full.
	Deliveries []Waiting
	// Sources are recorded as handled (RecordMessages), with this package
	// where their PackageID is 0, and their dead letters resolved.
	Sources []SourceMessage
	// Release are package locks released by the same commit: nobody can
	// take one before the work it guarded is visible.
	Release []*Lock
	// HashUnlocked says the caller holds no lock on the content hash. The
	// unit then fails with ErrHashTaken, having written nothing, when a
	// package with the hash is catalogued already or is being catalogued
	// by a unit in flight (whose commit it waits for): the catalogue's
	// unique hash decides in place of a lock's round trip. Without it, a
	// hash catalogued already is taken as the package (Created false).
	HashUnlocked bool
}

// ErrHashTaken is the error of a CataloguePackage with HashUnlocked whose
// content hash another package has: the caller locks the hash and looks
// the package up.
var ErrHashTaken = errors.New("content hash catalogued meanwhile")

// Catalogued is what CataloguePackage did.
type Catalogued struct {
	// ID is the package's id; Created is false when a package with its
	// content hash was there already (nothing of the package was written
	// then: its deliveries, sources and locks were).
	ID      int64
	Created bool
	// Queued are the destinations whose deliveries were queued.
	Queued []tg.ChatID
}

// packageID is the id of the package of the unit's content hash ($1), for
// the statements after the one that inserts it (same transaction, so they
// see it).
const packageID = `(SELECT id FROM packages WHERE content_hash = $1)`

// insertPackageSQL inserts a package with its parts, unique ids, listing
// and search row in one statement; it returns whether it inserted (false:
// the content hash was catalogued already, and nothing was written).
const insertPackageSQL = `WITH pkg AS (
	INSERT INTO packages (content_hash, name, format, total_size, part_count, file_count, listing_truncated,
		listing_error, origin_chat_id, origin_message_id, origin_topic_id, name_raw, encrypted, headers_encrypted,
		detected_format, verified, broken, name_lied, suspicious, content_sig, sig_checked)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $37)
	` + onHashConflict + ` RETURNING id
), parts AS (
	INSERT INTO package_parts (package_id, idx, file_name, size, sha256, source_chat_id, source_message_id, file_name_raw)
	SELECT pkg.id, p.idx, p.name, p.size, p.sha, p.chat, p.msg, p.raw
	FROM pkg, unnest($21::int[], $22::text[], $23::bigint[], $24::bytea[], $25::bigint[], $26::bigint[], $27::text[])
		AS p(idx, name, size, sha, chat, msg, raw)
), remote AS (
	INSERT INTO remote_files (unique_id, package_id, idx)
	SELECT r.u, pkg.id, r.idx FROM pkg, unnest($28::text[], $29::int[]) AS r(u, idx)
	ON CONFLICT (unique_id) DO NOTHING
), files AS (
	INSERT INTO package_files (package_id, ord, path, size, is_dir, unsafe, path_raw, flags, crc)
	SELECT pkg.id, f.ord - 1, f.path, f.size, f.dir, f.unsafe, f.raw, string_to_array(f.flags, ','), f.crc
	FROM pkg, unnest($30::text[], $31::bigint[], $32::bool[], $33::bool[], $34::text[], $35::text[], $36::bigint[])
		WITH ORDINALITY AS f(path, size, dir, unsafe, raw, flags, crc, ord)
), search AS (
	-- The search row (as migration 008 builds it) from the same paths: the
	-- file rows inserted above are not visible to this statement.
	INSERT INTO package_search (package_id, paths, names)
	SELECT pkg.id,
		string_agg(lower(replace(f.path, E'\n', U&'\FFFD')), E'\n' ORDER BY f.ord),
		E'\n' || string_agg(lower(replace(regexp_replace(f.path, '^.*/', ''), E'\n', U&'\FFFD')), E'\n' ORDER BY f.ord) || E'\n'
	FROM pkg, unnest($30::text[], $32::bool[]) WITH ORDINALITY AS f(path, dir, ord)
	WHERE NOT f.dir GROUP BY pkg.id
)
SELECT count(*) > 0 FROM pkg`

// onHashConflict makes insertPackageSQL write nothing when the content
// hash is catalogued already; insertNewPackageSQL, without it, fails then
// (unique_violation on packagesHashKey).
const onHashConflict = `ON CONFLICT (content_hash) DO NOTHING`

var insertNewPackageSQL = strings.Replace(insertPackageSQL, onHashConflict, "", 1)

// packagesHashKey is the unique constraint on packages.content_hash.
const packagesHashKey = "packages_content_hash_key"

// queueSQL queues the deliveries of the package the condition names
// ($1) to the destinations not queued already nor sent in full, and
// returns those queued.
const queueSQL = `INSERT INTO waiting_deliveries (package_id, destination_chat_id, account, route, opens_at,
		source_chat_id, source_topic_id, message_ids, part_count)
	SELECT p.id, w.dest, w.account, w.route, w.opens_at, $2, $3, $4, $5
	FROM packages p, unnest($6::bigint[], $7::text[], $8::text[], $9::timestamptz[]) AS w(dest, account, route, opens_at)
	WHERE %s AND (SELECT count(*) FROM deliveries d WHERE d.package_id = p.id AND d.state = 'sent'
		AND d.destination_chat_id = w.dest) < p.part_count
	ON CONFLICT (package_id, destination_chat_id) DO NOTHING
	RETURNING destination_chat_id`

// resolveSQL resolves the dead letters of the messages ($1, $2).
const resolveSQL = `UPDATE dead_letters d SET state = 'resolved', next_attempt_at = NULL, updated_at = now()
	FROM unnest($1::bigint[], $2::bigint[]) AS m(chat, msg)
	WHERE d.chat_id = m.chat AND d.message_id = m.msg AND d.state <> 'resolved'`

// CataloguePackage writes n in one group-committed unit (see Commit):
// one round trip shared with the other workers' units, one commit, and
// nothing of it if any of it fails. It is safe to run again: the content
// hash, the unique ids, the delivery queue and the source records each
// take a second write as a no-op.
func (s *Store) CataloguePackage(ctx context.Context, n NewPackage) (Catalogued, error) {
	var out Catalogued
	p := n.Package
	hash := p.ContentHash
	name, nameRaw := storableName(p.Name)
	v := n.Verification
	susp := v.Suspicious
	if susp == nil {
		susp = []string{}
	}
	args := append(append([]any{hash, name, p.Format, p.TotalSize, p.PartCount, p.FileCount, p.ListingTruncated,
		text(p.ListingError), int64(p.Origin.Chat), int64(p.Origin.Message), p.OriginTopic, nameRaw,
		p.Encrypted, p.HeadersEncrypted, p.DetectedFormat, v.Verified, text(v.Broken), v.NameLied, susp, n.Signature},
		partColumns(n.Parts)...), append(fileColumns(n.Files), n.SignatureChecked /* $37 */)...)
	var stmts []Statement
	if n.HashUnlocked && distinctSources(n.Sources) {
		// A package new to the catalogue (or the unit fails): everything
		// that goes with it rides in the one statement that inserts it.
		stmts = []Statement{newPackageStatement(args, n, &out)}
	} else {
		stmts = n.steps(args, &out)
	}
	if n.Signature != nil {
		// Serial: two packages, one inside the other, catalogued at
		// once by two commits would each miss the other, still
		// uncommitted; one at a time, the later sees the earlier.
		stmts = append(stmts, Statement{SQL: fmt.Sprintf(containmentSQL, packageID), Args: []any{hash}, Serial: true})
	}
	if n.RepackOf != 0 {
		stmts = append(stmts, Statement{SQL: `INSERT INTO package_links (package_id, other_id, kind)
			SELECT id, $2, $3 FROM packages WHERE content_hash = $1 ON CONFLICT (package_id, other_id) DO NOTHING`,
			Args: []any{hash, n.RepackOf, LinkRepack}})
	}
	if err := s.Commit(ctx, stmts...); err != nil {
		for _, l := range n.Release {
			l.notReleased()
		}
		if n.HashUnlocked && hashTaken(err) {
			err = fmt.Errorf("%w: %w", ErrHashTaken, err)
		}
		return Catalogued{}, fmt.Errorf("catalogue package %q: %w", text(p.Name), err)
	}
	return out, nil
}

// hashTaken reports whether err is an unlocked package insert's failure
// on another package's content hash: the unique violation, or the
// deadlock two group commits meet when each inserts a hash the other
// inserted first (PostgreSQL breaks it by failing one of them).
func hashTaken(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == uniqueViolation && pgErr.ConstraintName == packagesHashKey || pgErr.Code == deadlockDetected
}

// SQLSTATE codes (PostgreSQL, Appendix A).
const (
	uniqueViolation  = "23505"
	deadlockDetected = "40P01"
)

// queueStatement queues ws, the deliveries of one package (named by cond
// on packages p with pkg as $1) that share its parts, to the
// destinations not queued already nor sent in full, adding those queued
// to queued.
func queueStatement(cond string, pkg any, ws []Waiting, queued *[]tg.ChatID) Statement {
	return Statement{SQL: fmt.Sprintf(queueSQL, cond), Args: append([]any{pkg}, queueArgs(ws)...),
		Read: func(rows pgx.Rows) error {
			for rows.Next() {
				var d int64
				if err := rows.Scan(&d); err != nil {
					return err
				}
				*queued = append(*queued, tg.ChatID(d))
			}
			return rows.Err()
		}}
}

// QueueDeliveries puts ws, deliveries of package pkg that share its parts,
// in the delivery queue, each unless one to its destination is queued
// already (that one keeps its account, route and place) or the package is
// sent there in full, in one unit of the group commit. It returns the
// destinations queued.
func (s *Store) QueueDeliveries(ctx context.Context, pkg int64, ws []Waiting) ([]tg.ChatID, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	var queued []tg.ChatID
	if err := s.Commit(ctx, queueStatement("p.id = $1", pkg, ws, &queued)); err != nil {
		return nil, fmt.Errorf("queue deliveries of package %d: %w", pkg, err)
	}
	return queued, nil
}

// RecordHandled records msgs as handled (RecordMessages) and resolves
// their dead letters, in one group-committed unit.
func (s *Store) RecordHandled(ctx context.Context, msgs ...SourceMessage) error {
	if err := s.Commit(ctx, handledStatements(msgs, nil)...); err != nil {
		return fmt.Errorf("record %d messages: %w", len(msgs), err)
	}
	return nil
}

// handledStatements record msgs and resolve their dead letters; with
// hash, a message of package 0 is recorded with the package of that
// content hash.
func handledStatements(msgs []SourceMessage, hash []byte) []Statement {
	if len(msgs) == 0 {
		return nil
	}
	stmts := make([]Statement, 0, len(msgs)+1)
	chats, ids := make([]int64, len(msgs)), make([]int64, len(msgs))
	for i, m := range msgs {
		stmts = append(stmts, recordStatement(m, hash))
		chats[i], ids[i] = int64(m.Key.Chat), int64(m.Key.Message)
	}
	return append(stmts, Statement{SQL: resolveSQL, Args: []any{chats, ids}})
}

// partColumns are the parts as the arrays insertPackageSQL unnests ($21
// to $29).
func partColumns(parts []Part) []any {
	idx, names, sizes := make([]int32, len(parts)), make([]string, len(parts)), make([]int64, len(parts))
	shas, chats, msgs, raws := make([][]byte, len(parts)), make([]int64, len(parts)), make([]int64, len(parts)), make([]string, len(parts))
	var uniq []string
	var uniqIdx []int32
	for i, pt := range parts {
		names[i], raws[i] = storableName(pt.FileName)
		idx[i], sizes[i], shas[i] = int32(pt.Index), pt.Size, pt.SHA256
		chats[i], msgs[i] = int64(pt.Source.Chat), int64(pt.Source.Message)
		if pt.UniqueID != "" {
			uniq, uniqIdx = append(uniq, text(pt.UniqueID)), append(uniqIdx, int32(pt.Index))
		}
	}
	if uniq == nil {
		uniq, uniqIdx = []string{}, []int32{}
	}
	return []any{idx, names, sizes, shas, chats, msgs, raws, uniq, uniqIdx}
}

// fileColumns are the listing as the arrays insertPackageSQL unnests ($30
// to $36), each entry as CreatePackage stores it (fileRow).
func fileColumns(files []FileEntry) []any {
	paths, sizes := make([]string, len(files)), make([]int64, len(files))
	dirs, unsafe := make([]bool, len(files)), make([]bool, len(files))
	raws, flags, crcs := make([]string, len(files)), make([]string, len(files)), make([]*int64, len(files))
	for i, f := range files {
		r := fileRow(f)
		paths[i], sizes[i], dirs[i], unsafe[i], raws[i] = r.path, f.Size, f.Dir, r.unsafe, r.raw
		flags[i], crcs[i] = strings.Join(r.flags, ","), r.crc
	}
	return []any{paths, sizes, dirs, unsafe, raws, flags, crcs}
}

// storedFile is a FileEntry as its package_files row holds it.
type storedFile struct {
	path   string
	unsafe bool
	raw    string // hex
	flags  []string
	crc    *int64
}

// fileRow returns the row of f: a path that had to be cleaned is marked
// unsafe and keeps its raw bytes in hex.
func fileRow(f FileEntry) storedFile {
	path, changed := storable(f.Path)
	r := storedFile{path: path, unsafe: f.Unsafe || changed, flags: f.Flags}
	if f.Raw != "" {
		r.raw = hex.EncodeToString([]byte(f.Raw))
	} else if changed {
		r.raw = hex.EncodeToString([]byte(f.Path))
	}
	if r.flags == nil {
		r.flags = []string{}
	}
	if f.HasCRC {
		crc := int64(f.CRC)
		r.crc = &crc
	}
	return r
}

// scanOne reads the one row of a statement that returns one.
func scanOne(rows pgx.Rows, dst ...any) error {
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dst...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}
