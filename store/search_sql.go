package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// baseName is a listed file's base name as package_files_base_name
// indexes it: its first baseNameChars characters, lower-cased (a B-tree
// entry must fit in a third of a page, and an archive may name a file in
// 64 kB).
const (
	baseName      = `left(lower(regexp_replace(f.path, '^.*/', '')), 256)`
	baseNameChars = 256
)

// searchArgs numbers a statement's arguments.
type searchArgs []any

func (a *searchArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// listingOf joins each package p to its package_search row s, looked up
// by key package by package: the rows are wide, and a walk or a check
// reads a few hundred of them, never the table (the planner, from the
// row counts alone, may prefer to hash a small one).
const listingOf = `
	LEFT JOIN LATERAL (SELECT * FROM package_search l WHERE l.package_id = p.id LIMIT 1) s ON true`

// filters returns q's filters on p as SQL, each preceded by AND.
func filters(q SearchQuery, a *searchArgs) string {
	var sql strings.Builder
	if q.Format != "" {
		sql.WriteString(" AND p.format = " + a.add(q.Format))
	}
	if q.MinSize > 0 {
		sql.WriteString(" AND p.total_size >= " + a.add(q.MinSize))
	}
	if q.MaxSize > 0 {
		sql.WriteString(" AND p.total_size <= " + a.add(q.MaxSize))
	}
	if q.Source != 0 {
		c := a.add(int64(q.Source))
		fmt.Fprintf(&sql, ` AND (p.origin_chat_id = %[1]s OR EXISTS (SELECT 1 FROM source_messages m
			WHERE m.package_id = p.id AND m.chat_id = %[1]s))`, c)
	}
	if !q.Since.IsZero() {
		sql.WriteString(" AND p.created_at >= " + a.add(q.Since))
	}
	if !q.Until.IsZero() {
		sql.WriteString(" AND p.created_at < " + a.add(q.Until))
	}
	return sql.String()
}

// details reads the packages found, in order, each with its matching
// files: how many, and the best (by rank, then the shortest path).
func (r *searchRun) details(ctx context.Context, text string, ids []int64, ranks []int) ([]SearchHit, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var a searchArgs
	files := "SELECT NULL::text AS path, NULL::bigint AS size, 0 AS rank WHERE false"
	if text != "" {
		esc := likeEscape(text)
		files = fmt.Sprintf(`SELECT f.path, f.size,
			CASE WHEN lower(regexp_replace(f.path, '^.*/', '')) = lower(%[2]s::text) THEN 1
				WHEN lower(regexp_replace(f.path, '^.*/', '')) LIKE lower(%[3]s::text) THEN 2
				ELSE 3 END AS rank
		FROM package_files f WHERE f.package_id = p.id AND NOT f.is_dir AND lower(f.path) LIKE lower(%[1]s::text)`,
			a.add("%"+esc+"%"), a.add(text), a.add(esc+"%"))
	}
	sql := fmt.Sprintf(`SELECT p.id, p.content_hash, p.name, p.format, p.total_size, p.part_count, p.file_count,
	p.listing_truncated, p.listing_error, p.origin_chat_id, p.origin_message_id, p.origin_topic_id,
	p.created_at, h.rank, m.files, COALESCE(m.path, ''), COALESCE(m.size, 0),
	d.chats, d.messages, d.parts, d.sent
FROM unnest(%s::bigint[], %s::int[]) WITH ORDINALITY AS h(id, rank, n)
JOIN packages p ON p.id = h.id
CROSS JOIN LATERAL (SELECT count(*) AS files,
		(array_agg(path ORDER BY rank, length(path), path))[1] AS path,
		(array_agg(size ORDER BY rank, length(path), path))[1] AS size
	FROM (%s) f) m
CROSS JOIN LATERAL (SELECT array_agg(destination_chat_id ORDER BY destination_chat_id, part_idx) AS chats,
		array_agg(dest_message_id ORDER BY destination_chat_id, part_idx) AS messages,
		array_agg(part_idx ORDER BY destination_chat_id, part_idx) AS parts,
		array_agg(sent_at ORDER BY destination_chat_id, part_idx) AS sent
	FROM deliveries WHERE package_id = p.id AND state = 'sent') d
ORDER BY h.n`, a.add(ids), a.add(ranks), files)
	rows, err := r.query(ctx, sql, a)
	if err != nil {
		return nil, fmt.Errorf("search catalogue: %w", err)
	}
	hits, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SearchHit, error) {
		var h SearchHit
		var chats, messages []int64
		var parts []int
		var sent []*time.Time
		err := row.Scan(append(hitColumns(&h), &chats, &messages, &parts, &sent)...)
		for i := range chats {
			d := DeliveredPart{Chat: tg.ChatID(chats[i]), Message: tg.MessageID(messages[i]), Part: parts[i]}
			if sent[i] != nil {
				d.SentAt = *sent[i]
			}
			h.Deliveries = append(h.Deliveries, d)
		}
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("search catalogue: %w", err)
	}
	return hits, nil
}

// hitColumns returns where a hit's columns scan to, in the order the
// search statements select them.
func hitColumns(h *SearchHit) []any {
	p := &h.Package
	return []any{&p.ID, &p.ContentHash, &p.Name, &p.Format, &p.TotalSize, &p.PartCount, &p.FileCount,
		&p.ListingTruncated, &p.ListingError, &p.Origin.Chat, &p.Origin.Message, &p.OriginTopic,
		&h.Created, &h.Rank, &h.Files, &h.File, &h.FileSize}
}

func scanHit(r pgx.CollectableRow) (SearchHit, error) {
	var h SearchHit
	err := r.Scan(hitColumns(&h)...)
	return h, err
}

// scanFiles answers q from the file rows themselves, ranking every match
// before paging: the way for texts that package_search cannot answer.
func (r *searchRun) scanFiles(ctx context.Context, q SearchQuery, limit int) ([]SearchHit, error) {
	sql, args, _, err := buildSearch(q)
	if err != nil {
		return nil, err
	}
	rows, err := r.query(ctx, sql, args)
	if err != nil {
		return nil, fmt.Errorf("search catalogue: %w", err)
	}
	hits, err := pgx.CollectRows(rows, scanHit)
	if err != nil {
		return nil, fmt.Errorf("search catalogue: %w", err)
	}
	return hits, nil
}

// buildSearch returns the SQL of q over the file rows, its arguments and
// the page size.
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
