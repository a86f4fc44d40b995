package store_test

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/internal/cataloguetest"
	"stashd/internal/pgtest"
	"stashd/migrations"
	"stashd/store"
	"stashd/tg"
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

// A rare text is looked up in the indexes once the newest packages have
// been walked: names in packages_name_trgm, file names in
// package_files_base_name, paths in package_files_path_trgm. The texts
// that package_search cannot answer (a line break) still use the trigram
// index over the file rows.
func TestSearchUsesTrigramIndex(t *testing.T) {
	t.Parallel()
	// The seeded tables are tiny: take sequential scans off the table so
	// that the plans show whether an index can answer at all.
	st := openWith(t, "enable_seqscan=off")
	if _, err := cataloguetest.Seed(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	store.SetSearchBounds(st, 1, 1, 1, 1)
	plans, err := store.ExplainSearch(t.Context(), st, store.SearchQuery{Text: "dragon_bust"}, false)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(plans, "\n")
	for _, idx := range []string{"packages_name_trgm", "package_files_base_name", "package_files_path_trgm"} {
		if !strings.Contains(all, idx) {
			t.Errorf("plans do not use %s:\n%s", idx, all)
		}
	}
	conn, err := st.Pool().Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	plan := explain(t, conn.Conn(), store.SearchQuery{Text: "red\nline"})
	for _, idx := range []string{"package_files_path_trgm", "packages_name_trgm"} {
		if !strings.Contains(plan, idx) {
			t.Errorf("file rows plan does not use %s:\n%s", idx, plan)
		}
	}
}

// openWith opens a store on a fresh catalogue whose sessions run with the
// given PostgreSQL setting.
func openWith(t *testing.T, setting string) *store.Store {
	t.Helper()
	u, err := url.Parse(pgtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	v.Set("options", "-c "+setting)
	u.RawQuery = strings.ReplaceAll(v.Encode(), "+", "%20")
	st, err := store.Open(t.Context(), store.Config{URL: u.String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
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

// walkCatalogue catalogues 40 packages, newest last, whose names and
// listings match "gem" at every rank, at intervals that leave each rank
// dense in some stretches and absent in others; a few list nothing.
func walkCatalogue(t *testing.T, st *store.Store) {
	t.Helper()
	for i := 1; i <= 40; i++ {
		name, format := fmt.Sprintf("pack-%02d.zip", i), "zip"
		if i%2 == 1 {
			format = "7z"
		}
		if i%7 == 0 {
			name = fmt.Sprintf("Gem-pack-%02d.zip", i)
		}
		var files []store.FileEntry
		if i%13 != 0 {
			files = append(files, store.FileEntry{Path: "readme.txt", Size: 1},
				store.FileEntry{Path: fmt.Sprintf("models/part_%d.stl", i), Size: int64(i)})
		}
		if i%3 == 0 {
			files = append(files, store.FileEntry{Path: "gems/gem", Size: 3})
		}
		if i%4 == 0 || i > 30 {
			files = append(files, store.FileEntry{Path: "stuff/Gem_Large.stl", Size: 4})
		}
		if i%5 == 0 {
			files = append(files, store.FileEntry{Path: "big_gem.stl", Size: 5}, store.FileEntry{Path: "x/some_gem_thing.obj", Size: 50})
		}
		if i%11 == 0 {
			files = append(files, store.FileEntry{Path: "gem", Dir: true})
		}
		sum := sha256.Sum256([]byte(name))
		_, _, err := st.CreatePackage(t.Context(), store.Package{ContentHash: sum[:], Name: name, Format: format,
			TotalSize: int64(i) << 20, PartCount: 1, FileCount: len(files),
			Origin: tg.MessageKey{Chat: cataloguetest.SourceA, Message: tg.MessageIDFromServer(int64(i))}},
			[]store.Part{{FileName: name, Size: int64(i) << 20, SHA256: sum[:],
				Source: tg.MessageKey{Chat: cataloguetest.SourceA, Message: tg.MessageIDFromServer(int64(i))}}}, files)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// hitID is the package id of a hitLine.
func hitID(line string) int64 {
	id, _ := strconv.ParseInt(strings.Fields(line)[0], 10, 64)
	return id
}

// hitLine is what a test compares of a hit.
func hitLine(h store.SearchHit) string {
	return fmt.Sprintf("%d rank %d file %q (%d) of %d", h.Package.ID, h.Rank, h.File, h.FileSize, h.Files)
}

// pageThrough follows q's cursors to the end and returns every hit and
// the number of pages; it fails on a page over the limit.
func pageThrough(t *testing.T, q store.SearchQuery, search func(store.SearchQuery) (store.SearchPage, error)) ([]string, int) {
	t.Helper()
	var all []string
	for pages := 1; pages < 1000; pages++ {
		page, err := search(q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Hits) > q.Limit {
			t.Fatalf("%q: a page of %d hits, limit %d", q.Text, len(page.Hits), q.Limit)
		}
		for _, h := range page.Hits {
			all = append(all, hitLine(h))
		}
		if page.Next == "" {
			return all, pages
		}
		q.Cursor = page.Next
	}
	t.Fatalf("%q: no last page", q.Text)
	return nil, 0
}

// Probing the indexes, or walking package_search rank by rank, newest
// first, and handing the rest of a rank to the indexes, pages through
// exactly what ranking every matching file row does: every matching
// package once, in the same order, with the same best file and count. The
// bounds are shrunk so that 40 packages cross the walk's window at every
// rank; short texts, which only walk, newest first whatever the rank, may
// return short pages but reach the same packages.
func TestSearchWalkPagesLikeFileRows(t *testing.T) {
	t.Parallel()
	st := open(t)
	walkCatalogue(t, st)
	ctx := t.Context()
	queries := []store.SearchQuery{
		{Text: "gem"}, {Text: "GEM"}, {Text: "gem_l"}, {Text: "gem_large.stl"}, {Text: "readme.txt"},
		{Text: "readme"}, {Text: "part_1"}, {Text: "pack-1"}, {Text: "nothing"}, {Text: "%"}, {Text: "_"},
		{Text: "e"}, {Text: "ge"}, {Text: ""},
		{Text: "gem", Format: "7z"}, {Text: "gem", MinSize: 20 << 20}, {Text: "gem", Source: cataloguetest.SourceB},
	}
	// Window, walk, windows of a short text, probe: the defaults (a probe
	// answers every text of three characters), then walks through small
	// windows, handing ranks to the indexes soon or late.
	for _, bounds := range [][4]int{{0, 0, 0, 0}, {4, 4, 2, 1}, {4, 12, 2, 1}, {1, 1, 1, 1}, {5, 20, 0, 3}} {
		st := st
		if bounds != [4]int{} {
			st = open(t)
			walkCatalogue(t, st)
			store.SetSearchBounds(st, bounds[0], bounds[1], bounds[2], bounds[3])
		}
		for _, q := range queries {
			for _, limit := range []int{3, 50} {
				q.Limit = limit
				want, wantPages := pageThrough(t, q, func(q store.SearchQuery) (store.SearchPage, error) {
					return store.SearchFileRows(ctx, st, q)
				})
				got, pages := pageThrough(t, q, func(q store.SearchQuery) (store.SearchPage, error) { return st.Search(ctx, q) })
				if short := len([]rune(q.Text)) == 1 || len([]rune(q.Text)) == 2; short {
					// Newest first whatever the rank.
					slices.SortFunc(want, func(a, b string) int { return cmp.Compare(hitID(b), hitID(a)) })
				} else if pages != wantPages {
					t.Errorf("window %d, %+v: %d pages, want %d: only a short text may return a short page", bounds[0], q, pages, wantPages)
				}
				if !slices.Equal(got, want) {
					t.Errorf("window %d, %+v: walked\n  %s\nfile rows\n  %s", bounds[0], q, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
				}
			}
		}
	}
}

// A text of one or two characters has no trigram: a page reads at most
// window × windows packages, so a text found nowhere costs the same bounded
// walk on every page, and the cursor carries the walk on to the oldest
// package and then stops.
func TestSearchShortTextWalkIsBounded(t *testing.T) {
	t.Parallel()
	st := open(t)
	walkCatalogue(t, st)
	store.SetSearchBounds(st, 4, 0, 2, 0)
	q := store.SearchQuery{Text: "q", Limit: 50}
	pages := 0
	for {
		plans, err := store.ExplainSearch(t.Context(), st, q, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(plans) > 2+2 { // two windows, then details and deliveries at most
			t.Fatalf("page %d sent %d statements, want at most two windows:\n%s", pages+1, len(plans), strings.Join(plans, "\n\n"))
		}
		page, err := st.Search(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Hits) != 0 {
			t.Fatalf("page %d: hits %v for a text found nowhere", pages, ids(page))
		}
		if page.Next == "" {
			break
		}
		if pages == 10 {
			t.Fatal("the walk never reached the oldest package")
		}
		q.Cursor = page.Next
	}
	if pages != 5 { // 40 packages, 8 a page
		t.Errorf("%d pages, want 5 of 8 packages each", pages)
	}
}

// Every statement of a broad search reads rows in proportion to the page:
// with every listed file matching, the file rows read are those of the
// page's packages only (and the probe's few), and the listing rows read
// are at most one window.
// Ranking every matching file row first would read them all.
func TestSearchWorkIsBoundedByPage(t *testing.T) {
	t.Parallel()
	st := open(t)
	const packages, filesEach, limit, window = 120, 10, 5, 20
	for i := range packages {
		var files []store.FileEntry
		for j := range filesEach {
			files = append(files, store.FileEntry{Path: fmt.Sprintf("set/mini_%d_%d.stl", i, j), Size: 1})
		}
		name := fmt.Sprintf("set-%d.zip", i)
		sum := sha256.Sum256([]byte(name))
		_, _, err := st.CreatePackage(t.Context(), store.Package{ContentHash: sum[:], Name: name, Format: "zip",
			TotalSize: 1, PartCount: 1, FileCount: filesEach, Origin: tg.MessageKey{Chat: cataloguetest.SourceA, Message: tg.MessageIDFromServer(int64(i + 1))}},
			[]store.Part{{FileName: name, Size: 1, SHA256: sum[:], Source: tg.MessageKey{Chat: cataloguetest.SourceA, Message: tg.MessageIDFromServer(int64(i + 1))}}}, files)
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range []string{"packages", "package_files", "package_search"} {
		if _, err := st.Pool().Exec(t.Context(), "ANALYZE "+table); err != nil {
			t.Fatal(err)
		}
	}
	const probe = 20
	store.SetSearchBounds(st, window, window, 0, probe)
	q := store.SearchQuery{Text: "mini_", Limit: limit}
	plans, err := store.ExplainSearch(t.Context(), st, q, false)
	if err != nil {
		t.Fatal(err)
	}
	files, listings := rowsRead(plans, "package_files"), rowsRead(plans, "package_search")
	if files > probe+1+limit*filesEach || listings > window+1 {
		t.Errorf("a page of %d read %d file rows (want at most %d: the probe's and the page's) and %d listing rows (at most %d, a window):\n%s",
			limit, files, probe+1+limit*filesEach, listings, window+1, strings.Join(plans, "\n\n"))
	}
	// The measure can fail: ranking every matching row reads them all.
	plans, err = store.ExplainSearch(t.Context(), st, q, true)
	if err != nil {
		t.Fatal(err)
	}
	if files := rowsRead(plans, "package_files"); files < packages*filesEach {
		t.Errorf("ranking every matching file row read %d file rows, want all %d:\n%s", files, packages*filesEach, strings.Join(plans, "\n\n"))
	}
	page, err := st.Search(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Hits) != limit || page.Hits[0].Package.ID != packages || page.Hits[0].Files != filesEach {
		t.Errorf("hits %v (%d files in the first), want the %d newest packages with all %d files matching", ids(page), page.Hits[0].Files, limit, filesEach)
	}
}

// rowsRead sums the rows that the plans' scans of table returned.
func rowsRead(plans []string, table string) int {
	re := regexp.MustCompile(` on ` + table + ` \w+ \(actual time=[0-9.]+\.\.[0-9.]+ rows=(\d+) loops=(\d+)\)`)
	n := 0
	for _, p := range plans {
		for _, m := range re.FindAllStringSubmatch(p, -1) {
			rows, _ := strconv.Atoi(m[1])
			loops, _ := strconv.Atoi(m[2])
			n += rows * loops
		}
	}
	return n
}

// A line break inside a listed path is no line of package_search: a file
// named "…red\nline.stl" is not a file named "line.stl", walked or probed,
// and a text holding a line break is answered from the file rows.
func TestSearchLineBreakInPath(t *testing.T) {
	t.Parallel()
	for _, probe := range []int{0, 1} {
		st, s := seeded(t)
		store.SetSearchBounds(st, 1, 0, 0, probe)
		name := "line-sets.zip"
		sum := sha256.Sum256([]byte(name))
		other, _, err := st.CreatePackage(t.Context(), store.Package{ContentHash: sum[:], Name: name, Format: "zip", TotalSize: 1,
			PartCount: 1, FileCount: 1, Origin: tg.MessageKey{Chat: cataloguetest.SourceA, Message: tg.MessageIDFromServer(90)}},
			[]store.Part{{FileName: name, Size: 1, SHA256: sum[:], Source: tg.MessageKey{Chat: cataloguetest.SourceA, Message: tg.MessageIDFromServer(90)}}},
			[]store.FileEntry{{Path: "other/line.stl.bak", Size: 7}})
		if err != nil {
			t.Fatal(err)
		}
		page, err := st.Search(t.Context(), store.SearchQuery{Text: "line.stl"})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{fmt.Sprintf("%d rank %d file %q (7) of 1", other, store.RankFilePrefix, "other/line.stl.bak"),
			fmt.Sprintf("%d rank %d file %q (200) of 1", s.Hostile, store.RankFilePath, cataloguetest.Control)}
		var got []string
		for _, h := range page.Hits {
			got = append(got, hitLine(h))
		}
		if !slices.Equal(got, want) {
			t.Errorf("probe %d: line.stl found\n  %s\nwant\n  %s", probe, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		for text, want := range map[string][]int64{"red\nline": {s.Hostile}, "red\uFFFDline": nil} {
			page, err := st.Search(t.Context(), store.SearchQuery{Text: text})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(page), want) {
				t.Errorf("probe %d: %q found %v, want %v", probe, text, ids(page), want)
			}
		}
	}
}

// The listing rows written with a package are those that migration 008
// writes for a catalogue that predates it.
func TestSearchListingAsMigrated(t *testing.T) {
	t.Parallel()
	st, s := seeded(t)
	walkCatalogue(t, st)
	ctx := t.Context()
	listings := func() []string {
		rows, err := st.Pool().Query(ctx, `SELECT format('%s %L %L', package_id, paths, names) FROM package_search ORDER BY package_id`)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	written := listings()
	var listed int
	if err := st.Pool().QueryRow(ctx, `SELECT count(DISTINCT package_id) FROM package_files WHERE NOT is_dir`).Scan(&listed); err != nil {
		t.Fatal(err)
	}
	if len(written) != listed {
		t.Errorf("%d listing rows for %d packages listing files", len(written), listed)
	}
	var paths, names string
	if err := st.Pool().QueryRow(ctx, `SELECT paths, names FROM package_search WHERE package_id = $1`, s.Dragon).Scan(&paths, &names); err != nil {
		t.Fatal(err)
	}
	if paths != "models/dragons/dragon_bust.stl\nmodels/dragons/dragon_bust_base.stl\nmodels/knight.stl" ||
		names != "\ndragon_bust.stl\ndragon_bust_base.stl\nknight.stl\n" {
		t.Errorf("listing of the dragon package: paths %q, names %q", paths, names)
	}

	migration, err := fs.ReadFile(migrations.FS, "008_search_listing.sql")
	if err != nil {
		t.Fatal(err)
	}
	fill := regexp.MustCompile(`(?s)INSERT INTO package_search.*?;`).Find(migration)
	if fill == nil {
		t.Fatal("migration 008 fills no package_search rows")
	}
	if _, err := st.Pool().Exec(ctx, "DELETE FROM package_search"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, string(fill)); err != nil {
		t.Fatal(err)
	}
	if migrated := listings(); !slices.Equal(migrated, written) {
		t.Errorf("migration 008 writes\n  %s\nthe store wrote\n  %s", strings.Join(migrated, "\n  "), strings.Join(written, "\n  "))
	}
}

// An archive may name a file in tens of kilobytes: such a package is
// catalogued, and found by its file's whole name or any start of it, walked
// or probed.
func TestSearchLongFileName(t *testing.T) {
	t.Parallel()
	// 4,000 characters that do not compress, and an ending.
	var b strings.Builder
	for sum := sha256.Sum256([]byte("long")); b.Len() < 4000; sum = sha256.Sum256(sum[:]) {
		b.WriteString(hex.EncodeToString(sum[:]))
	}
	long := "Sketch-" + b.String() + "-end.stl"
	for _, probe := range []int{0, 1} {
		st := open(t)
		walkCatalogue(t, st)
		store.SetSearchBounds(st, 2, 2, 0, probe)
		for i, path := range []string{"long/" + long, "other/" + long + ".bak"} {
			name := fmt.Sprintf("long-%d.zip", i)
			sum := sha256.Sum256([]byte(name))
			_, _, err := st.CreatePackage(t.Context(), store.Package{ContentHash: sum[:], Name: name, Format: "zip", TotalSize: 1,
				PartCount: 1, FileCount: 1, Origin: tg.MessageKey{Chat: cataloguetest.SourceA, Message: tg.MessageIDFromServer(int64(90 + i))}},
				[]store.Part{{FileName: name, Size: 1, SHA256: sum[:], Source: tg.MessageKey{Chat: cataloguetest.SourceA, Message: tg.MessageIDFromServer(int64(90 + i))}}},
				[]store.FileEntry{{Path: path, Size: 9}})
			if err != nil {
				t.Fatalf("catalogue a file named in %d bytes: %v", len(path), err)
			}
		}
		for _, text := range []string{long, strings.ToUpper(long[:600]), long[:100], "end.stl"} {
			q := store.SearchQuery{Text: text, Limit: 2}
			want, _ := pageThrough(t, q, func(q store.SearchQuery) (store.SearchPage, error) { return store.SearchFileRows(t.Context(), st, q) })
			got, _ := pageThrough(t, q, func(q store.SearchQuery) (store.SearchPage, error) { return st.Search(t.Context(), q) })
			if len(want) < 2 || !slices.Equal(got, want) {
				t.Errorf("probe %d, %d characters: found\n  %s\nwant\n  %s", probe, len([]rune(text)), strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		}
	}
}
