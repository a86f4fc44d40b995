package store

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
// The work is bounded by the page, not by how many files match. The newest
// packages (a window of 200) are ranked first, in one statement over one
// row per package: its name and its listing in package_search. The share
// of them that matches tells a rare text from a broad one. A rare text
// (at most about 500 matching packages in the catalogue) is looked up in
// the trigram indexes of names and file rows and ranked whole, which costs
// what its few matches cost. A broad text is read rank by rank, newest
// first: a dense rank fills the page from the window, or from a few more
// windows, and a rank too sparse for that is completed from the indexes
// (names, base names, paths), whose candidates are then few.
// Texts of fewer than three characters have no trigram to look up: they
// are walked newest first whatever the rank, at most 1,000 packages a page,
// and a page may come back short, even empty, with a Next that continues
// the walk. A text holding a line break (or U+FFFD, which stands for one in
// package_search) is answered from the file rows alone.
//
// The cursor is the last hit's (rank, package id) — or, after a short
// walk, where the walk stopped — so a later page costs what the first
// does and pages neither repeat nor skip a package.
func (s *Store) Search(ctx context.Context, q SearchQuery) (SearchPage, error) {
	page, _, err := s.search(ctx, q, searchOptions{})
	return page, err
}

// searchOptions are the benchmark's and the tests' ways into a search.
type searchOptions struct {
	// explain also runs every statement under EXPLAIN ANALYZE and returns
	// the plans, in order.
	explain bool
	// fileRows answers from the file rows alone, ranking every match
	// before paging: the way every text went before package_search.
	fileRows bool
}

// searchBounds bounds Search's walks; zero fields mean the defaults below.
type searchBounds struct {
	// window is how many packages, newest first, a walk reads in one
	// statement; the first window also tells a rare text from a broad one.
	window int
	// walk bounds the packages a walk reads for one rank before the rest
	// of the rank is asked of the indexes: a walk of w packages fills a
	// page of n when at least n/w of them match; a sparser rank has at
	// most about n/w of the older packages, and the indexes hand over that
	// many candidates. 2,000 keeps both near two thousand rows for a page
	// of 50 in 100,000 packages.
	walk int
	// shortWindows bounds the windows one page of a short text reads.
	shortWindows int
	// probe bounds the matching names, and the matching file rows, that a
	// probe ranks: past it a text counts as broad and is walked.
	probe int
}

const (
	defaultSearchWindow       = 200
	defaultSearchWalk         = 2000
	defaultSearchShortWindows = 5
	defaultSearchProbe        = 500
	// shortText is the length, in characters, from which a text has a
	// trigram to look up.
	shortText = 3
)

// search runs q.
func (s *Store) search(ctx context.Context, q SearchQuery, o searchOptions) (SearchPage, []string, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	r := &searchRun{pool: s.pool, explain: o.explain,
		windowSize: cmp.Or(s.searchBounds.window, defaultSearchWindow),
		walkLimit:  cmp.Or(s.searchBounds.walk, defaultSearchWalk),
		shortWalks: cmp.Or(s.searchBounds.shortWindows, defaultSearchShortWindows),
		probeSize:  cmp.Or(s.searchBounds.probe, defaultSearchProbe)}
	var hits []SearchHit
	var next string
	var err error
	if o.fileRows || strings.ContainsAny(q.Text, "\n\uFFFD") {
		// package_search writes line breaks in paths as U+FFFD: only the
		// file rows can tell such texts apart.
		hits, err = r.scanFiles(ctx, q, limit)
		if len(hits) > limit {
			hits = hits[:limit]
			next = encodeCursor(hits[limit-1].Rank, hits[limit-1].Package.ID)
		}
		if err == nil {
			err = s.addDeliveries(ctx, hits)
		}
	} else {
		var found []int64
		var ranks []int
		found, ranks, next, err = r.probeOrWalk(ctx, q, limit)
		if len(found) > limit {
			found, ranks = found[:limit], ranks[:limit]
			rank := ranks[limit-1]
			if isShort(q.Text) {
				rank = 0 // newest first whatever the rank: see walkShort
			}
			next = encodeCursor(rank, found[limit-1])
		}
		if err == nil {
			hits, err = r.details(ctx, q.Text, found, ranks)
		}
	}
	if err != nil {
		return SearchPage{}, r.plans, err
	}
	return SearchPage{Hits: hits, Next: next}, r.plans, nil
}

// addDeliveries reads the confirmed deliveries of the hits.
func (s *Store) addDeliveries(ctx context.Context, hits []SearchHit) error {
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.Package.ID
	}
	dels, err := s.deliveredParts(ctx, ids)
	if err != nil {
		return err
	}
	for i := range hits {
		hits[i].Deliveries = dels[hits[i].Package.ID]
	}
	return nil
}

// searchRun sends one search's statements, unprepared so that PostgreSQL
// plans each with the actual pattern and can pick the trigram index.
type searchRun struct {
	pool                  *pgxpool.Pool
	explain               bool
	plans                 []string
	windowSize, walkLimit int
	shortWalks            int
	probeSize             int
	windows               map[int64]*searchWindow
}

func (r *searchRun) query(ctx context.Context, sql string, args []any) (pgx.Rows, error) {
	if r.explain {
		rows, err := r.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+sql, append([]any{pgx.QueryExecModeExec}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("explain search: %w", err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("explain search: %w", err)
		}
		r.plans = append(r.plans, sql+"\n"+strings.Join(lines, "\n"))
	}
	return r.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

// ids runs sql and returns the first column of its rows.
func (r *searchRun) ids(ctx context.Context, sql string, args []any) ([]int64, error) {
	rows, err := r.query(ctx, sql, args)
	if err != nil {
		return nil, fmt.Errorf("search catalogue: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("search catalogue: %w", err)
	}
	return ids, nil
}

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

// searchRank is one rank of a text.
type searchRank struct {
	rank int
	// has is true for the packages with a match of this rank, as SQL over
	// p (packages) and s (package_search, NULL for a package without
	// listed files), with the text's patterns as arguments.
	has func(a *searchArgs) string
	// files, for the file ranks, keeps listed files (f) of the rank's
	// packages and, for the path rank, of the ranks before it. It is
	// answered per file: base names from package_files_base_name, paths
	// from package_files_path_trgm. (A trigram index over package_search
	// would not do: a whole listing holds the trigrams of most texts, so
	// nearly every package would be a candidate.)
	files func(a *searchArgs) string
}

// searchRanks returns the ranks of a text, best first.
func searchRanks(text string) []searchRank {
	if text == "" {
		return []searchRank{{rank: RankName, has: func(*searchArgs) string { return "true" }}}
	}
	esc := likeEscape(text)
	path := func(a *searchArgs) string { return "f.path ILIKE " + a.add("%"+esc+"%") }
	exact := func(a *searchArgs) string { return baseName + " = lower(" + a.add(text) + "::text)" }
	prefix := func(a *searchArgs) string { return baseName + " LIKE lower(" + a.add(esc+"%") + "::text)" }
	if utf8.RuneCountInString(text) > baseNameChars {
		// Past what the base-name index holds: such a text is rare,
		// and the trigram index finds its files.
		exact, prefix = path, path
	}
	return []searchRank{
		{rank: RankName, has: func(a *searchArgs) string { return "p.name ILIKE " + a.add("%"+esc+"%") }},
		{rank: RankFileExact,
			has:   func(a *searchArgs) string { return "s.names LIKE lower(" + a.add("%\n"+esc+"\n%") + "::text)" },
			files: exact},
		{rank: RankFilePrefix,
			has:   func(a *searchArgs) string { return "s.names LIKE lower(" + a.add("%\n"+esc+"%") + "::text)" },
			files: prefix},
		{rank: RankFilePath,
			has:   func(a *searchArgs) string { return "s.paths LIKE lower(" + a.add("%"+esc+"%") + "::text)" },
			files: path},
	}
}

// only returns SQL true for the packages whose best match is of rank i:
// it has a match of rank i and none better. The file ranks nest (a file
// named exactly the text starts with it, and contains it), so a match of
// rank i excludes the rank before it and the name rank only.
func only(ranks []searchRank, i int, a *searchArgs) string {
	sql := ranks[i].has(a)
	if i > 1 {
		sql += " AND NOT " + ranks[i-1].has(a)
	}
	if i > 0 {
		sql += " AND NOT " + ranks[0].has(a)
	}
	return sql
}

// listingOf joins each package p to its package_search row s, looked up
// by key package by package: the rows are wide, and a walk or a check
// reads a few hundred of them, never the table (the planner, from the
// row counts alone, may prefer to hash a small one).
const listingOf = `
	LEFT JOIN LATERAL (SELECT * FROM package_search l WHERE l.package_id = p.id LIMIT 1) s ON true`

// searchWindow is what a walk read: packages, newest first, each with its
// best rank, -1 when it does not match or is filtered out.
type searchWindow struct {
	ids   []int64
	ranks []int
	// more is true when older packages remain below the last one read.
	more bool
	// matched counts the packages read that match, filtered out or not;
	// packages is PostgreSQL's estimate of the catalogue's size.
	matched  int
	packages float64
}

// window returns the window below upper, read once per search: a later
// rank starts again from the newest package, and the window read for one
// rank serves the others.
func (r *searchRun) window(ctx context.Context, q SearchQuery, ranks []searchRank, upper int64) (*searchWindow, error) {
	if w, ok := r.windows[upper]; ok {
		return w, nil
	}
	w, err := r.walkWindow(ctx, q, ranks, upper)
	if err != nil {
		return nil, err
	}
	if r.windows == nil {
		r.windows = map[int64]*searchWindow{}
	}
	r.windows[upper] = w
	return w, nil
}

func (w *searchWindow) floor() int64 { return w.ids[len(w.ids)-1] }

// walkWindow reads the newest r.windowSize packages below upper and ranks each.
func (r *searchRun) walkWindow(ctx context.Context, q SearchQuery, ranks []searchRank, upper int64) (*searchWindow, error) {
	var a searchArgs
	var sql strings.Builder
	fmt.Fprintf(&sql, `SELECT p.id, (SELECT reltuples FROM pg_class WHERE oid = 'packages'::regclass), true%s, CASE`, filters(q, &a))
	for i, rk := range ranks {
		if i == 1 {
			// Most packages match a rare text nowhere: one look at the
			// paths, which hold every file match, settles them.
			fmt.Fprintf(&sql, " WHEN (%s) IS NOT TRUE THEN NULL", ranks[len(ranks)-1].has(&a))
		}
		fmt.Fprintf(&sql, " WHEN %s THEN %d", rk.has(&a), rk.rank)
	}
	fmt.Fprintf(&sql, " END\nFROM (SELECT * FROM packages WHERE id < %s ORDER BY id DESC LIMIT %d) p", a.add(upper), r.windowSize+1)
	if q.Text != "" {
		sql.WriteString(listingOf)
	}
	sql.WriteString("\nORDER BY p.id DESC")
	rows, err := r.query(ctx, sql.String(), a)
	if err != nil {
		return nil, fmt.Errorf("search catalogue: %w", err)
	}
	w := &searchWindow{}
	var id int64
	var packages float32
	var kept bool
	var rank *int
	_, err = pgx.ForEachRow(rows, []any{&id, &packages, &kept, &rank}, func() error {
		if len(w.ids) == r.windowSize {
			// One row past the window tells that older packages remain.
			w.more = true
			return nil
		}
		w.ids, w.packages = append(w.ids, id), float64(packages)
		switch {
		case rank == nil:
			w.ranks = append(w.ranks, -1)
		case !kept:
			w.ranks = append(w.ranks, -1)
			w.matched++
		default:
			w.ranks = append(w.ranks, *rank)
			w.matched++
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("search catalogue: %w", err)
	}
	return w, nil
}

// probeOrWalk returns up to limit+1 packages matching q in order, with
// their ranks, and where a short text's walk stopped (see walkShort).
//
// A text of three characters or more is ranked in the newest window
// first. When the share of it that matches, over the whole catalogue, makes
// at most r.probeSize packages, the text is rare: it is looked up in the
// trigram indexes (see probe), as cheaply as its matches are few. Otherwise
// it is walked: a lookup in the file rows' trigram index builds a bitmap of
// every match before the first row comes back, page or no page, so it is
// only made for a rank that the window leaves short, whose matches are
// then few.
func (r *searchRun) probeOrWalk(ctx context.Context, q SearchQuery, limit int) ([]int64, []int, string, error) {
	if isShort(q.Text) {
		return r.walkShort(ctx, q, limit)
	}
	if q.Text != "" {
		w, err := r.window(ctx, q, searchRanks(q.Text), math.MaxInt64)
		if err != nil {
			return nil, nil, "", err
		}
		if w.more && float64(w.matched)*w.packages/float64(len(w.ids)) <= float64(r.probeSize) {
			found, ranks, broad, err := r.probe(ctx, q, limit)
			if err != nil || !broad {
				return found, ranks, "", err
			}
		}
	}
	found, ranks, err := r.walk(ctx, q, limit)
	return found, ranks, "", err
}

// probe looks q up in the trigram indexes of names and of file rows, with
// at most r.probeSize names and as many file rows, and returns up to limit+1
// packages in order with their ranks; or broad, when either bound was
// passed and the answer would not be exact.
func (r *searchRun) probe(ctx context.Context, q SearchQuery, limit int) (found []int64, ranks []int, broad bool, err error) {
	// Case is folded by PostgreSQL on both sides (ILIKE folds as lower()
	// does), as everywhere in the walk: the answer is the same either way.
	var a searchArgs
	pattern, exact, prefix := a.add("%"+likeEscape(q.Text)+"%"), a.add(q.Text), a.add(likeEscape(q.Text)+"%")
	var sql strings.Builder
	fmt.Fprintf(&sql, `WITH names AS MATERIALIZED (
	SELECT p.id FROM packages p WHERE p.name ILIKE %[1]s LIMIT %[4]d
), files AS MATERIALIZED (
	SELECT f.package_id,
		CASE WHEN lower(regexp_replace(f.path, '^.*/', '')) = lower(%[2]s::text) THEN 1
			WHEN lower(regexp_replace(f.path, '^.*/', '')) LIKE lower(%[3]s::text) THEN 2
			ELSE 3 END AS rank
	FROM package_files f WHERE f.path ILIKE %[1]s AND NOT f.is_dir LIMIT %[4]d
), best AS (
	SELECT package_id, min(rank) AS rank
	FROM (SELECT id AS package_id, 0 AS rank FROM names UNION ALL SELECT package_id, rank FROM files) m
	GROUP BY package_id
), page AS (
	SELECT p.id, b.rank FROM best b JOIN packages p ON p.id = b.package_id
	WHERE true`, pattern, exact, prefix, r.probeSize+1)
	sql.WriteString(filters(q, &a))
	if q.Cursor != "" {
		rank, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return nil, nil, false, err
		}
		fmt.Fprintf(&sql, " AND (b.rank, -p.id) > (%s::int, -%s::bigint)", a.add(rank), a.add(id))
	}
	fmt.Fprintf(&sql, `
	ORDER BY b.rank, p.id DESC LIMIT %s
)
SELECT (SELECT count(*) FROM names) > %[2]d OR (SELECT count(*) FROM files) > %[2]d, page.id, page.rank
FROM (SELECT 1) one LEFT JOIN page ON true
ORDER BY page.rank, page.id DESC`, a.add(limit+1), r.probeSize)
	rows, err := r.query(ctx, sql.String(), a)
	if err != nil {
		return nil, nil, false, fmt.Errorf("search catalogue: %w", err)
	}
	var id *int64
	var rank *int
	_, err = pgx.ForEachRow(rows, []any{&broad, &id, &rank}, func() error {
		if id != nil {
			found, ranks = append(found, *id), append(ranks, *rank)
		}
		return nil
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("search catalogue: %w", err)
	}
	return found, ranks, broad, nil
}

// walk returns up to limit+1 packages matching q in order, with their
// ranks, read rank by rank as Search describes.
func (r *searchRun) walk(ctx context.Context, q SearchQuery, limit int) ([]int64, []int, error) {
	fromRank, below := 0, int64(math.MaxInt64)
	if q.Cursor != "" {
		rank, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return nil, nil, err
		}
		fromRank, below = rank, id
	}
	ranks := searchRanks(q.Text)
	var found []int64
	var foundRanks []int
	take := func(id int64, rank int) {
		found = append(found, id)
		foundRanks = append(foundRanks, rank)
	}
	for i, rk := range ranks {
		if rk.rank < fromRank {
			continue
		}
		upper := int64(math.MaxInt64)
		if rk.rank == fromRank {
			upper = below
		}
		for walked := 0; ; {
			w, err := r.window(ctx, q, ranks, upper)
			if err != nil {
				return nil, nil, err
			}
			of := 0 // packages of the rank in this window
			for j, id := range w.ids {
				if w.ranks[j] == rk.rank {
					of++
					if len(found) <= limit {
						take(id, rk.rank)
					}
				}
			}
			walked += len(w.ids)
			need := limit + 1 - len(found)
			if need == 0 || !w.more {
				break
			}
			// Walk on while the rank's share of this window promises
			// the rest of the page within walkLimit packages; a rank
			// sparser than that is asked of the indexes, which then
			// hand over few candidates. The name rank goes there after
			// one window: its index covers names only, whose rows are
			// short, and costs less a candidate than a walk a package.
			bound := r.walkLimit
			if rk.files == nil {
				bound = 0
			}
			if of == 0 || walked+need*len(w.ids)/of > bound {
				ids, err := r.older(ctx, q, ranks, i, w.floor(), need)
				if err != nil {
					return nil, nil, err
				}
				for _, id := range ids {
					take(id, rk.rank)
				}
				break
			}
			upper = w.floor()
		}
		if len(found) > limit {
			break
		}
	}
	return found, foundRanks, nil
}

// isShort reports whether text is too short to have a trigram.
func isShort(text string) bool {
	return text != "" && utf8.RuneCountInString(text) < shortText
}

// walkShort returns, newest first, up to limit+1 packages matching a text
// of fewer than three characters, with their ranks, and the cursor to go
// on from when it stopped short. Such a text has no trigram to look up, and
// it is found in most packages when at all: the ranks are not read one
// after the other, which would walk the catalogue once per rank, but all
// at once, newest first, at most r.shortWalks windows a page.
func (r *searchRun) walkShort(ctx context.Context, q SearchQuery, limit int) ([]int64, []int, string, error) {
	below := int64(math.MaxInt64)
	if q.Cursor != "" {
		_, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return nil, nil, "", err
		}
		below = id
	}
	ranks := searchRanks(q.Text)
	var found []int64
	var foundRanks []int
	for range r.shortWalks {
		w, err := r.walkWindow(ctx, q, ranks, below)
		if err != nil {
			return nil, nil, "", err
		}
		for j, id := range w.ids {
			if w.ranks[j] >= 0 {
				found, foundRanks = append(found, id), append(foundRanks, w.ranks[j])
				if len(found) > limit {
					return found, foundRanks, "", nil
				}
			}
		}
		if !w.more {
			return found, foundRanks, "", nil
		}
		below = w.floor()
	}
	return found, foundRanks, encodeCursor(0, below), nil
}

// older returns up to want packages of rank i below floor, newest first,
// from the indexes: for the name rank the trigram index on names, for the
// file ranks the candidates of the rank's files.
func (r *searchRun) older(ctx context.Context, q SearchQuery, ranks []searchRank, i int, floor int64, want int) ([]int64, error) {
	var a searchArgs
	var from string
	if ranks[i].files == nil {
		from = "packages p\nWHERE p.id < " + a.add(floor)
	} else {
		var c searchArgs
		candidates, err := r.ids(ctx, fmt.Sprintf(`SELECT DISTINCT f.package_id FROM package_files f
WHERE %s AND NOT f.is_dir AND f.package_id < %s ORDER BY f.package_id DESC`, ranks[i].files(&c), c.add(floor)), c)
		if err != nil || len(candidates) == 0 {
			return nil, err
		}
		from = "packages p" + listingOf + "\nWHERE p.id = ANY(" + a.add(candidates) + "::bigint[])"
	}
	return r.ids(ctx, "SELECT p.id FROM "+from+" AND "+only(ranks, i, &a)+filters(q, &a)+
		"\nORDER BY p.id DESC LIMIT "+a.add(want), a)
}

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

// searchListingSQL writes the package_search rows (migration 008) of the
// packages whose file rows the condition keeps.
const searchListingSQL = `INSERT INTO package_search (package_id, paths, names)
SELECT package_id,
	string_agg(lower(replace(path, E'\n', U&'\FFFD')), E'\n' ORDER BY ord),
	E'\n' || string_agg(lower(replace(regexp_replace(path, '^.*/', ''), E'\n', U&'\FFFD')), E'\n' ORDER BY ord) || E'\n'
FROM package_files WHERE NOT is_dir AND %s GROUP BY package_id`

// indexListing writes the search row of package id from its file rows,
// in the transaction that wrote them.
func indexListing(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := tx.Exec(ctx, fmt.Sprintf(searchListingSQL, "package_id = $1"), id); err != nil {
		return fmt.Errorf("index listing of package %d: %w", id, err)
	}
	return nil
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
