package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// SearchQuery asks the catalogue for packages whose name or listed paths
// contain Text. Zero fields do not filter.
type SearchQuery struct {
	// Text is matched as a substring, ignoring case, against package names
	// and every listed path. Empty: every package, newest first.
	Text string
	// Format keeps packages of this format (zip, rar, 7z, tar…).
	Format string
	// MinSize and MaxSize bound the package's total size in bytes; zero
	// means no bound.
	MinSize, MaxSize int64
	// Source keeps packages posted in this chat (as origin or as a
	// duplicate re-post).
	Source tg.ChatID
	// Since and Until bound when the package was catalogued.
	Since, Until time.Time
	// Limit is the page size; zero means 50, at most 500.
	Limit int
	// Cursor continues a previous page (SearchPage.Next); empty starts.
	Cursor string
}

// Match ranks, best first: a package name containing the text, a listed
// file named exactly the text, a file name starting with it, a file path
// containing it elsewhere.
const (
	RankName       = 0
	RankFileExact  = 1
	RankFilePrefix = 2
	RankFilePath   = 3
)

// SearchHit is one package of a result page.
type SearchHit struct {
	Package Package `json:"-"`
	// Rank is the best rank among the package's matches (RankName…).
	Rank int `json:"rank"`
	// File is the best matching listed path, empty when only the package
	// name matched; FileSize is its size.
	File     string `json:"file,omitempty"`
	FileSize int64  `json:"file_size,omitempty"`
	// Files counts the package's listed paths that match.
	Files      int             `json:"matching_files"`
	Created    time.Time       `json:"catalogued_at"`
	Deliveries []DeliveredPart `json:"deliveries"`
}

// DeliveredPart is one confirmed copy of a package part in a destination.
type DeliveredPart struct {
	Chat    tg.ChatID    `json:"chat_id"`
	Message tg.MessageID `json:"message_id"`
	Part    int          `json:"part"`
	SentAt  time.Time    `json:"sent_at"`
}

// SearchPage is one page of results. Next, when not empty, is the cursor
// of the following page.
type SearchPage struct {
	Hits []SearchHit `json:"hits"`
	Next string      `json:"next,omitempty"`
}

// ErrBadCursor is returned for a cursor that Search did not make.
var ErrBadCursor = errors.New("bad search cursor")

// Search returns one page of packages matching q, best ranked first and,
// within a rank, newest first, each with its confirmed deliveries.
//
// The query finds the matches of the text in names and listings (each
// answered by a trigram index when the text has three characters or
// more), keeps each package's best match, filters and pages by (rank, id):
// a keyset cursor, so a later page costs what the first does. It is built
// for the filters given and sent unprepared, so PostgreSQL plans it with
// the actual pattern and can pick the trigram index.
func (s *Store) Search(ctx context.Context, q SearchQuery) (SearchPage, error) {
	sql, args, limit, err := buildSearch(q)
	if err != nil {
		return SearchPage{}, err
	}
	rows, err := s.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return SearchPage{}, fmt.Errorf("search catalogue: %w", err)
	}
	hits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SearchHit, error) {
		var h SearchHit
		p := &h.Package
		var oc, om int64
		err := r.Scan(&p.ID, &p.ContentHash, &p.Name, &p.Format, &p.TotalSize, &p.PartCount, &p.FileCount,
			&p.ListingTruncated, &p.ListingError, &oc, &om, &p.OriginTopic,
			&h.Created, &h.Rank, &h.Files, &h.File, &h.FileSize)
		p.Origin = tg.MessageKey{Chat: tg.ChatID(oc), Message: tg.MessageID(om)}
		return h, err
	})
	if err != nil {
		return SearchPage{}, fmt.Errorf("search catalogue: %w", err)
	}
	var page SearchPage
	if len(hits) > limit {
		hits = hits[:limit]
		last := hits[limit-1]
		page.Next = encodeCursor(last.Rank, last.Package.ID)
	}
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.Package.ID
	}
	dels, err := s.deliveredParts(ctx, ids)
	if err != nil {
		return SearchPage{}, err
	}
	for i := range hits {
		hits[i].Deliveries = dels[hits[i].Package.ID]
	}
	page.Hits = hits
	return page, nil
}

// buildSearch returns the SQL of q, its arguments and the page size.
func buildSearch(q SearchQuery) (string, []any, int, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	args := []any{}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var sql strings.Builder
	text := strings.ToLower(q.Text)
	if text == "" {
		sql.WriteString(`WITH best AS (SELECT id AS package_id, 0 AS rank, 0 AS files, NULL::text AS path,
			NULL::bigint AS size FROM packages)`)
	} else {
		pattern := arg("%" + likeEscape(text) + "%")
		exact, prefix := arg(text), arg(likeEscape(text)+"%")
		fmt.Fprintf(&sql, `WITH matches AS (
	SELECT p.id AS package_id, NULL::text AS path, 0::bigint AS size, 0 AS rank
	FROM packages p WHERE p.name ILIKE %[1]s
	UNION ALL
	SELECT f.package_id, f.path, f.size,
		CASE WHEN lower(regexp_replace(f.path, '^.*/', '')) = %[2]s THEN 1
			WHEN lower(regexp_replace(f.path, '^.*/', '')) LIKE %[3]s THEN 2
			ELSE 3 END
	FROM package_files f WHERE f.path ILIKE %[1]s AND NOT f.is_dir
), best AS (
	SELECT package_id, min(rank) AS rank, count(path) AS files,
		(array_agg(path ORDER BY rank, length(path), path) FILTER (WHERE path IS NOT NULL))[1] AS path,
		(array_agg(size ORDER BY rank, length(path), path) FILTER (WHERE path IS NOT NULL))[1] AS size
	FROM matches GROUP BY package_id
)`, pattern, exact, prefix)
	}
	sql.WriteString(`
SELECT p.id, p.content_hash, p.name, p.format, p.total_size, p.part_count, p.file_count,
	p.listing_truncated, p.listing_error, p.origin_chat_id, p.origin_message_id, p.origin_topic_id,
	p.created_at, b.rank, b.files, COALESCE(b.path, ''), COALESCE(b.size, 0)
FROM best b JOIN packages p ON p.id = b.package_id
WHERE true`)
	if q.Format != "" {
		sql.WriteString(" AND p.format = " + arg(q.Format))
	}
	if q.MinSize > 0 {
		sql.WriteString(" AND p.total_size >= " + arg(q.MinSize))
	}
	if q.MaxSize > 0 {
		sql.WriteString(" AND p.total_size <= " + arg(q.MaxSize))
	}
	if q.Source != 0 {
		c := arg(int64(q.Source))
		fmt.Fprintf(&sql, ` AND (p.origin_chat_id = %[1]s OR EXISTS (SELECT 1 FROM source_messages m
			WHERE m.package_id = p.id AND m.chat_id = %[1]s))`, c)
	}
	if !q.Since.IsZero() {
		sql.WriteString(" AND p.created_at >= " + arg(q.Since))
	}
	if !q.Until.IsZero() {
		sql.WriteString(" AND p.created_at < " + arg(q.Until))
	}
	if q.Cursor != "" {
		rank, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return "", nil, 0, err
		}
		fmt.Fprintf(&sql, " AND (b.rank, -p.id) > (%s::int, -%s::bigint)", arg(rank), arg(id))
	}
	sql.WriteString("\nORDER BY b.rank, p.id DESC LIMIT " + arg(limit+1))
	return sql.String(), args, limit, nil
}

// deliveredParts returns the confirmed deliveries of the packages by id.
func (s *Store) deliveredParts(ctx context.Context, ids []int64) (map[int64][]DeliveredPart, error) {
	out := map[int64][]DeliveredPart{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT package_id, destination_chat_id, dest_message_id, part_idx, sent_at
		FROM deliveries WHERE package_id = ANY($1) AND state = 'sent'
		ORDER BY package_id, destination_chat_id, part_idx`, ids)
	if err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pkg, c, m int64
		var d DeliveredPart
		var sent *time.Time
		if err := rows.Scan(&pkg, &c, &m, &d.Part, &sent); err != nil {
			return nil, fmt.Errorf("read deliveries: %w", err)
		}
		d.Chat, d.Message = tg.ChatID(c), tg.MessageID(m)
		if sent != nil {
			d.SentAt = *sent
		}
		out[pkg] = append(out[pkg], d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	return out, nil
}

// likeEscape escapes LIKE's wildcards so that text matches literally.
func likeEscape(text string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(text)
}

func encodeCursor(rank int, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(rank) + "." + strconv.FormatInt(id, 10)))
}

func decodeCursor(c string) (int, int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, 0, ErrBadCursor
	}
	r, i, ok := strings.Cut(string(b), ".")
	rank, err1 := strconv.Atoi(r)
	id, err2 := strconv.ParseInt(i, 10, 64)
	if !ok || err1 != nil || err2 != nil || rank < 0 || id <= 0 {
		return 0, 0, ErrBadCursor
	}
	return rank, id, nil
}

// PackageDetail is everything the catalogue knows of one package.
type PackageDetail struct {
	Package    Package
	Created    time.Time
	Parts      []Part
	Files      []FileEntry
	Origins    []SourceMessage // every source message that carried it
	Deliveries []DeliveryRecord
}

// DeliveryRecord is one delivery row of a package, in any state, as the
// console shows it.
type DeliveryRecord struct {
	Chat    tg.ChatID
	Part    int
	State   string
	Message tg.MessageID // 0 until confirmed
	Account string
	Error   string
	SentAt  time.Time
}

// GetPackageDetail returns a package with its parts, listing, origins and
// deliveries. A missing package is ErrNotFound.
func (s *Store) GetPackageDetail(ctx context.Context, id int64) (PackageDetail, error) {
	var d PackageDetail
	p, err := s.GetPackage(ctx, id)
	if err != nil {
		return d, err
	}
	d.Package = p
	if err := s.pool.QueryRow(ctx, `SELECT created_at FROM packages WHERE id = $1`, id).Scan(&d.Created); err != nil {
		return d, fmt.Errorf("get package %d: %w", id, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT idx, file_name, size, sha256, source_chat_id, source_message_id
		FROM package_parts WHERE package_id = $1 ORDER BY idx`, id)
	if err != nil {
		return d, fmt.Errorf("read parts of package %d: %w", id, err)
	}
	d.Parts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Part, error) {
		var pt Part
		var c, m int64
		err := r.Scan(&pt.Index, &pt.FileName, &pt.Size, &pt.SHA256, &c, &m)
		pt.Source = tg.MessageKey{Chat: tg.ChatID(c), Message: tg.MessageID(m)}
		return pt, err
	})
	if err != nil {
		return d, fmt.Errorf("read parts of package %d: %w", id, err)
	}
	rows, err = s.pool.Query(ctx, `SELECT path, size, is_dir, unsafe FROM package_files WHERE package_id = $1 ORDER BY ord`, id)
	if err != nil {
		return d, fmt.Errorf("read listing of package %d: %w", id, err)
	}
	d.Files, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (FileEntry, error) {
		var f FileEntry
		err := r.Scan(&f.Path, &f.Size, &f.Dir, &f.Unsafe)
		return f, err
	})
	if err != nil {
		return d, fmt.Errorf("read listing of package %d: %w", id, err)
	}
	rows, err = s.pool.Query(ctx, `SELECT chat_id, message_id, topic_id, date, file_name, file_size, outcome
		FROM source_messages WHERE package_id = $1 ORDER BY handled_at, chat_id, message_id`, id)
	if err != nil {
		return d, fmt.Errorf("read origins of package %d: %w", id, err)
	}
	d.Origins, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (SourceMessage, error) {
		var m SourceMessage
		var c, msg int64
		var date *time.Time
		var out string
		err := r.Scan(&c, &msg, &m.TopicID, &date, &m.FileName, &m.FileSize, &out)
		m.Key = tg.MessageKey{Chat: tg.ChatID(c), Message: tg.MessageID(msg)}
		m.Outcome, m.PackageID = Outcome(out), id
		if date != nil {
			m.Date = *date
		}
		return m, err
	})
	if err != nil {
		return d, fmt.Errorf("read origins of package %d: %w", id, err)
	}
	rows, err = s.pool.Query(ctx, `SELECT destination_chat_id, part_idx, state, COALESCE(dest_message_id, 0), account,
			error, sent_at
		FROM deliveries WHERE package_id = $1 ORDER BY destination_chat_id, part_idx`, id)
	if err != nil {
		return d, fmt.Errorf("read deliveries of package %d: %w", id, err)
	}
	d.Deliveries, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeliveryRecord, error) {
		var x DeliveryRecord
		var c, m int64
		var sent *time.Time
		err := r.Scan(&c, &x.Part, &x.State, &m, &x.Account, &x.Error, &sent)
		x.Chat, x.Message = tg.ChatID(c), tg.MessageID(m)
		if sent != nil {
			x.SentAt = *sent
		}
		return x, err
	})
	if err != nil {
		return d, fmt.Errorf("read deliveries of package %d: %w", id, err)
	}
	return d, nil
}
