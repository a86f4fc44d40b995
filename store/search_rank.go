package store

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

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
