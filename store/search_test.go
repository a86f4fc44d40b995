package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/internal/cataloguetest"
	"stashd/store"
)

func seeded(t *testing.T) (*store.Store, cataloguetest.Seeded) {
	t.Helper()
	st := open(t)
	s, err := cataloguetest.Seed(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	return st, s
}

func ids(p store.SearchPage) []int64 {
	var out []int64
	for _, h := range p.Hits {
		out = append(out, h.Package.ID)
	}
	return out
}

// A file deep inside a package's listing is found by any substring of its
// name in any case, with the package's deliveries; a package whose name
// matches ranks above one where only a listed file does.
func TestSearchFindsFilesInsideArchives(t *testing.T) {
	t.Parallel()
	st, s := seeded(t)
	ctx := t.Context()

	page, err := st.Search(ctx, store.SearchQuery{Text: "DRAGON_bu"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Hits) != 1 || page.Hits[0].Package.ID != s.Dragon {
		t.Fatalf("hits %v, want only package %d", ids(page), s.Dragon)
	}
	h := page.Hits[0]
	if h.File != "models/dragons/Dragon_Bust.stl" || h.FileSize != 12<<20 || h.Files != 2 || h.Rank != store.RankFilePrefix {
		t.Errorf("hit = file %q size %d, %d matching, rank %d; want the shorter of two matches, Dragon_Bust.stl", h.File, h.FileSize, h.Files, h.Rank)
	}
	if len(h.Deliveries) != 2 || h.Deliveries[0].Chat != cataloguetest.Destination || h.Deliveries[1].Message.ServerID() != 101 {
		t.Errorf("deliveries = %+v, want both parts in the destination", h.Deliveries)
	}

	page, err = st.Search(ctx, store.SearchQuery{Text: "dragon"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(page); !slices.Equal(got, []int64{s.Terrain, s.Dragon}) {
		t.Errorf("dragon: hits %v, want the package named so (%d) before the one listing it (%d)", got, s.Terrain, s.Dragon)
	}

	page, err = st.Search(ctx, store.SearchQuery{Text: "dragon_bust.stl"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Hits) != 1 || page.Hits[0].Rank != store.RankFileExact {
		t.Errorf("exact file name: hits %+v, want one exact match", page.Hits)
	}
}

// LIKE's wildcards in the text match literally.
func TestSearchTextIsLiteral(t *testing.T) {
	t.Parallel()
	st, s := seeded(t)
	for text, want := range map[string]int{"%": 5, "100%_": 5, "_": 6, `\`: 0, "nowhere": 0} {
		page, err := st.Search(t.Context(), store.SearchQuery{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Hits) != want {
			t.Errorf("%q: %d hits, want %d (the filler packages %v list 100%%_done.txt, the minis Dragon_Bust.stl)", text, len(page.Hits), want, s.Others)
		}
	}
}

func TestSearchFilters(t *testing.T) {
	t.Parallel()
	st, s := seeded(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		q    store.SearchQuery
		want []int64
	}{
		{"format", store.SearchQuery{Text: "dragon", Format: "7z"}, []int64{s.Dragon}},
		{"min size", store.SearchQuery{Text: "dragon", MinSize: 100 << 20}, []int64{s.Dragon}},
		{"max size", store.SearchQuery{Text: "dragon", MaxSize: 100 << 20}, []int64{s.Terrain}},
		{"re-post source", store.SearchQuery{Text: "dragon", Source: cataloguetest.SourceB}, []int64{s.Terrain, s.Dragon}},
		{"origin source", store.SearchQuery{Text: "dragon", Source: cataloguetest.SourceA}, []int64{s.Dragon}},
		{"since tomorrow", store.SearchQuery{Text: "dragon", Since: time.Now().Add(24 * time.Hour)}, nil},
		{"until tomorrow", store.SearchQuery{Text: "dragon", Until: time.Now().Add(24 * time.Hour)}, []int64{s.Terrain, s.Dragon}},
	} {
		page, err := st.Search(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(page); !slices.Equal(got, tc.want) {
			t.Errorf("%s: hits %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Pages follow each other by cursor without gaps or repeats; an empty text
// lists every package; a forged cursor is an error.
func TestSearchPagesByCursor(t *testing.T) {
	t.Parallel()
	st, s := seeded(t)
	ctx := t.Context()
	var all []int64
	q := store.SearchQuery{Limit: 2}
	for range 10 {
		page, err := st.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ids(page)...)
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	want := append([]int64{s.Dragon, s.Terrain, s.Hostile}, s.Others...)
	slices.Sort(want)
	slices.Reverse(want)
	if !slices.Equal(all, want) {
		t.Errorf("paged through %v, want every package newest first %v", all, want)
	}
	if _, err := st.Search(ctx, store.SearchQuery{Cursor: "not-a-cursor"}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("forged cursor: err %v, want ErrBadCursor", err)
	}
}

// The substring match is answered from the trigram indexes, not by reading
// every listed path.
func TestSearchUsesTrigramIndex(t *testing.T) {
	t.Parallel()
	st, _ := seeded(t)
	conn, err := st.Pool().Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// The seeded tables are tiny: take sequential scans off the table so
	// that the plan shows whether an index can answer at all.
	if _, err := conn.Exec(t.Context(), "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	plan := explain(t, conn.Conn(), store.SearchQuery{Text: "dragon_bust"})
	for _, idx := range []string{"package_files_path_trgm", "packages_name_trgm"} {
		if !strings.Contains(plan, idx) {
			t.Errorf("plan does not use %s:\n%s", idx, plan)
		}
	}
}

func TestPackageDetail(t *testing.T) {
	t.Parallel()
	st, s := seeded(t)
	d, err := st.GetPackageDetail(t.Context(), s.Dragon)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Parts) != 2 || len(d.Files) != 5 || len(d.Origins) != 2 || len(d.Deliveries) != 2 || d.Deliveries[0].State != "sent" {
		t.Errorf("detail: %d parts, %d files, %d origins, deliveries %+v; want 2, 5, 2 and two sent", len(d.Parts), len(d.Files), len(d.Origins), d.Deliveries)
	}
	if _, err := st.GetPackageDetail(t.Context(), 1<<40); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing package: err %v, want ErrNotFound", err)
	}
}

// explain returns the plan of q's search on conn.
func explain(t testing.TB, conn *pgx.Conn, q store.SearchQuery) string {
	t.Helper()
	sql, args, err := store.BuildSearch(q)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(t.Context(), "EXPLAIN "+sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
