package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// Outcome is what handling a source message ended in.
type Outcome string

// Outcomes of a source message.
const (
	// OutcomePackage: the message carried (a part of) a package it brought in.
	OutcomePackage Outcome = "package"
	// OutcomeDuplicate: the package was already catalogued; the source was linked.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeNotArchive: no document, or a document that is not an archive.
	OutcomeNotArchive Outcome = "not_archive"
	// OutcomePartPending: a part of a multipart set that is not complete yet.
	OutcomePartPending Outcome = "part_pending"
	// OutcomeDeadLetter: handling failed; see dead_letters.
	OutcomeDeadLetter Outcome = "dead_letter"
)

// SourceMessage is one handled message of a source.
type SourceMessage struct {
	Key     tg.MessageKey
	TopicID int64
	AlbumID int64
	Date    time.Time
	// EditDate is the message's edit date as the handling saw it (zero:
	// never edited).
	EditDate  time.Time
	FileName  string
	FileSize  int64
	UniqueID  string
	Outcome   Outcome
	SetKey    string
	PartIndex int
	PackageID int64 // 0 = none
	// HandledAt is when the record was written (SetParts reads it; writes
	// take the database's clock).
	HandledAt time.Time
}

// RecordMessages writes the handling outcome of messages. A message already
// recorded is updated only when it moves on from a provisional outcome
// (part_pending, dead_letter) or is attached to a package.
func (s *Store) RecordMessages(ctx context.Context, msgs ...SourceMessage) error {
	batch := &pgx.Batch{}
	for _, m := range msgs {
		st := recordStatement(m, nil)
		batch.Queue(st.SQL, st.Args...)
	}
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("record %d messages: %w", len(msgs), err)
	}
	return nil
}

// RecordMessage is RecordMessages for one message and reports whether the
// record was written: false when the message's record stands as it is (it
// moved on from a provisional outcome meanwhile, or it is the record of
// another document, one an edit replaced or replaced with).
func (s *Store) RecordMessage(ctx context.Context, m SourceMessage) (bool, error) {
	st := recordStatement(m, nil)
	tag, err := s.pool.Exec(ctx, st.SQL, st.Args...)
	if err != nil {
		return false, fmt.Errorf("record message %s: %w", m.Key, err)
	}
	return tag.RowsAffected() > 0, nil
}

// recordSQL records one source message (RecordMessages); %s is its
// package id.
const recordSQL = `INSERT INTO source_messages (chat_id, message_id, topic_id, album_id, date, file_name,
		file_size, unique_id, outcome, set_key, part_index, package_id, file_name_raw, file_name_cleaned, edit_date)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, %s, $13, $14, $15)
	` + recordConflict

// recordConflict is how a record meets the message's earlier one.
const recordConflict = `ON CONFLICT (chat_id, message_id) DO UPDATE SET outcome = EXCLUDED.outcome,
		package_id = COALESCE(EXCLUDED.package_id, source_messages.package_id),
		set_key = EXCLUDED.set_key, part_index = EXCLUDED.part_index, handled_at = now()
	WHERE (source_messages.outcome IN ('part_pending', 'dead_letter')
		OR (source_messages.package_id IS NULL AND EXCLUDED.package_id IS NOT NULL))
		-- A record of the document an edit replaced never
		-- overwrites the record of the message's new document.
		AND (source_messages.unique_id = EXCLUDED.unique_id OR source_messages.unique_id = ''
			OR EXCLUDED.unique_id = '')`

var (
	// recordSQLByID takes the package id as $12.
	recordSQLByID = fmt.Sprintf(recordSQL, "$12::bigint")
	// recordSQLByHash takes the package of content hash $16 when $12 is
	// null.
	recordSQLByHash = fmt.Sprintf(recordSQL, "COALESCE($12::bigint, (SELECT id FROM packages WHERE content_hash = $16))")
)

// recordStatement records m. With hash set, a message of package 0 is
// recorded with the package of that content hash, written earlier in the
// same transaction (CataloguePackage).
func recordStatement(m SourceMessage, hash []byte) Statement {
	var pkg *int64
	if m.PackageID != 0 {
		pkg = &m.PackageID
	}
	name, raw := storableName(m.FileName)
	st := Statement{SQL: recordSQLByID, Args: []any{int64(m.Key.Chat), int64(m.Key.Message), m.TopicID, m.AlbumID, timeOrNull(m.Date), name,
		m.FileSize, text(m.UniqueID), string(m.Outcome), text(m.SetKey), m.PartIndex, pkg, raw, raw != "", timeOrNull(m.EditDate)}}
	if hash != nil {
		st.SQL, st.Args = recordSQLByHash, append(st.Args, hash)
	}
	return st
}

// timeOrNull is t, or NULL for the zero time.
func timeOrNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// PendingSet names one incomplete set.
type PendingSet struct {
	Chat    tg.ChatID
	TopicID int64
	SetKey  string
	// Newest is when the most recent part was recorded.
	Newest time.Time
	// Oldest is when the first part was recorded.
	Oldest time.Time
}

// PendingSets lists the sets with parts waiting, for sources of account.
func (s *Store) PendingSets(ctx context.Context, account string) ([]PendingSet, error) {
	rows, err := s.pool.Query(ctx, `SELECT m.chat_id, m.topic_id, m.set_key, max(m.handled_at), min(m.handled_at)
		FROM source_messages m JOIN sources src ON src.chat_id = m.chat_id
		WHERE m.outcome = 'part_pending' AND src.account = $1
		GROUP BY m.chat_id, m.topic_id, m.set_key ORDER BY min(m.handled_at)`, account)
	if err != nil {
		return nil, fmt.Errorf("list pending sets: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingSet, error) {
		var p PendingSet
		var chat int64
		err := r.Scan(&chat, &p.TopicID, &p.SetKey, &p.Newest, &p.Oldest)
		p.Chat = tg.ChatID(chat)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list pending sets: %w", err)
	}
	return out, nil
}

// SetParts returns the pending parts of one set, by message id.
func (s *Store) SetParts(ctx context.Context, chat tg.ChatID, topic int64, setKey string) ([]SourceMessage, error) {
	rows, err := s.pool.Query(ctx, `SELECT chat_id, message_id, topic_id, album_id, date, file_name, file_size,
			unique_id, set_key, part_index, edit_date, handled_at
		FROM source_messages WHERE chat_id = $1 AND topic_id = $2 AND set_key = $3 AND outcome = 'part_pending'
		ORDER BY message_id`, int64(chat), topic, setKey)
	if err != nil {
		return nil, fmt.Errorf("list parts of %q: %w", setKey, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SourceMessage, error) {
		var p SourceMessage
		var c, m int64
		var date, edited *time.Time
		err := r.Scan(&c, &m, &p.TopicID, &p.AlbumID, &date, &p.FileName, &p.FileSize, &p.UniqueID,
			&p.SetKey, &p.PartIndex, &edited, &p.HandledAt)
		p.Key = tg.MessageKey{Chat: tg.ChatID(c), Message: tg.MessageID(m)}
		p.Outcome = OutcomePartPending
		if date != nil {
			p.Date = *date
		}
		if edited != nil {
			p.EditDate = edited.UTC()
		}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list parts of %q: %w", setKey, err)
	}
	return out, nil
}

// Package is a catalogued archive or multipart set.
type Package struct {
	ID               int64
	ContentHash      []byte
	Name             string
	Format           string
	TotalSize        int64
	PartCount        int
	FileCount        int
	ListingTruncated bool
	ListingError     string
	Origin           tg.MessageKey
	OriginTopic      int64
	// Encrypted: some entry's data is encrypted.
	Encrypted bool
	// HeadersEncrypted: the entry names are encrypted, so FileCount 0 does
	// not mean an empty archive.
	HeadersEncrypted bool
	// DetectedFormat is the format the bytes' magic showed when the name
	// said another (Format is then the one listed); "" otherwise.
	DetectedFormat string
	// Broken is why the archive failed verification, for one mirrored
	// anyway (Verification.Broken); "" otherwise. GetPackage reads it;
	// CreatePackage ignores it (verification is recorded on its own).
	Broken string
}

// Part is one file of a package.
type Part struct {
	Index    int
	FileName string
	Size     int64
	SHA256   []byte
	UniqueID string
	Source   tg.MessageKey
}

// FileEntry is one entry of a package's listing.
type FileEntry struct {
	Path   string
	Size   int64
	Dir    bool
	Unsafe bool
	// Raw is the name exactly as the archive stores it, when Path was
	// cleaned or cut ("" otherwise); it is stored in hex.
	Raw string
	// Flags are what the listing found about the entry: FlagCleaned,
	// FlagCut, FlagBidi, FlagLinkEscape, FlagEncrypted.
	Flags []string
	// CRC is the CRC-32 of the entry's content as the archive records
	// it, when HasCRC; repacks and containment are matched on it.
	CRC    uint32
	HasCRC bool
}

// Flags of a FileEntry.
const (
	FlagCleaned    = "cleaned"     // invalid UTF-8 or control characters replaced or removed
	FlagCut        = "cut"         // cut at the path length bound
	FlagBidi       = "bidi"        // holds a bidirectional override or isolate
	FlagLinkEscape = "link_escape" // a link out of the root, or written through one
	FlagEncrypted  = "encrypted"   // the entry's data is encrypted
)

// PackageOfPart returns the package one of whose parts is the Telegram
// file with this unique id (its own part or an identical re-post): a part
// posted again after its set was catalogued.
func (s *Store) PackageOfPart(ctx context.Context, uniqueID string) (int64, bool, error) {
	return s.PackageHolding(ctx, []string{uniqueID})
}

// AddRemoteFiles records more unique ids for the parts of a package (an
// identical re-upload), so the next copy is recognised without a download.
func (s *Store) AddRemoteFiles(ctx context.Context, pkg int64, uniqueIDs []string) error {
	batch := &pgx.Batch{}
	for i, u := range uniqueIDs {
		if u != "" {
			batch.Queue(`INSERT INTO remote_files (unique_id, package_id, idx) VALUES ($1, $2, $3)
				ON CONFLICT (unique_id) DO NOTHING`, u, pkg, i)
		}
	}
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("add remote files of package %d: %w", pkg, err)
	}
	return nil
}

// CreatePackage catalogues a package with its parts and listing alone
// (CataloguePackage with nothing else: no verification, links, deliveries
// or source records). When a package with the same content hash exists
// already it returns that package's id and created=false: the hash
// constraint, not the caller's earlier check, is what makes this exact.
func (s *Store) CreatePackage(ctx context.Context, p Package, parts []Part, files []FileEntry) (id int64, created bool, err error) {
	got, err := s.CataloguePackage(ctx, NewPackage{Package: p, Parts: parts, Files: files})
	return got.ID, got.Created, err
}

// GetPackage returns a catalogued package.
func (s *Store) GetPackage(ctx context.Context, id int64) (Package, error) {
	var p Package
	if err := s.look(ctx, LookPackage(id, &p)); err != nil {
		if errors.Is(err, ErrNotFound) {
			return Package{}, err
		}
		return Package{}, fmt.Errorf("get package %d: %w", id, err)
	}
	return p, nil
}

// LookPackage reads package id into out (GetPackage as a Statement); the
// read fails with ErrNotFound when there is none.
func LookPackage(id int64, out *Package) Statement {
	return Statement{SQL: `SELECT id, content_hash, name, format, total_size, part_count, file_count,
			listing_truncated, listing_error, origin_chat_id, origin_message_id, origin_topic_id,
			encrypted, headers_encrypted, detected_format, broken
		FROM packages WHERE id = $1`, Args: []any{id},
		Read: func(rows pgx.Rows) error {
			var p Package
			var oc, om int64
			err := scanOne(rows, &p.ID, &p.ContentHash, &p.Name, &p.Format, &p.TotalSize,
				&p.PartCount, &p.FileCount, &p.ListingTruncated, &p.ListingError, &oc, &om, &p.OriginTopic,
				&p.Encrypted, &p.HeadersEncrypted, &p.DetectedFormat, &p.Broken)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("package %d: %w", id, ErrNotFound)
			}
			p.Origin = tg.MessageKey{Chat: tg.ChatID(oc), Message: tg.MessageID(om)}
			*out = p
			return err
		}}
}

// PackageHashes returns the content hash of every catalogued package.
func (s *Store) PackageHashes(ctx context.Context) (map[[32]byte]Package, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, content_hash, name, format, part_count, file_count, listing_error FROM packages`)
	if err != nil {
		return nil, fmt.Errorf("list packages: %w", err)
	}
	out := map[[32]byte]Package{}
	for rows.Next() {
		var p Package
		if err := rows.Scan(&p.ID, &p.ContentHash, &p.Name, &p.Format, &p.PartCount, &p.FileCount, &p.ListingError); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list packages: %w", err)
		}
		out[[32]byte(p.ContentHash)] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list packages: %w", err)
	}
	return out, nil
}
