package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"stashd/internal/cataloguetest"
	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// FuzzSearch runs arbitrary queries (text, cursor, filters, page size)
// against a real catalogue seeded with hostile names. A query of valid
// text either fails
// with ErrBadCursor or answers a page that keeps its filters and its size
// bound, whose Next continues without error.
func FuzzSearch(f *testing.F) {
	st, err := store.Open(context.Background(), store.Config{URL: pgtest.New(f), MaxConns: 4})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(st.Close)
	s, err := cataloguetest.Seed(context.Background(), st)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("dragon_bust.STL", "", "", int64(0), int64(0), int64(0), 0)
	f.Add("", "", "zip", int64(1), int64(1<<40), int64(0), 1)
	f.Add("%_\\", "MC4xMjM", "", int64(0), int64(0), int64(-1002000000001), 500)
	f.Add(cataloguetest.Hostile, "", "", int64(-5), int64(0), int64(0), -1)
	f.Add("ab", "", "", int64(0), int64(0), int64(s.Dragon), 2)
	f.Add("line\nbreak", "!!", "rar", int64(0), int64(0), int64(0), 3)
	f.Fuzz(func(t *testing.T, text, cursor, format string, minSize, maxSize, source int64, limit int) {
		// PostgreSQL text holds neither NUL nor invalid UTF-8, and Search
		// passes Text and Format on as they are: its callers (the console,
		// the CLI) refuse such input first.
		for _, v := range []string{text, format} {
			if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				t.Skip("not PostgreSQL text")
			}
		}
		q := store.SearchQuery{Text: text, Cursor: cursor, Format: format, MinSize: minSize, MaxSize: maxSize,
			Source: tg.ChatID(source), Limit: limit}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		page, err := st.Search(ctx, q)
		if errors.Is(err, store.ErrBadCursor) {
			return
		}
		if err != nil {
			t.Fatalf("Search(%+v): %v", q, err)
		}
		want := limit
		if want <= 0 {
			want = 50
		}
		if len(page.Hits) > min(want, 500) {
			t.Fatalf("Search(%+v): %d hits, page size %d", q, len(page.Hits), want)
		}
		for _, h := range page.Hits {
			p := h.Package
			if (format != "" && p.Format != format) || (minSize > 0 && p.TotalSize < minSize) || (maxSize > 0 && p.TotalSize > maxSize) {
				t.Fatalf("Search(%+v): hit %+v breaks a filter", q, p)
			}
		}
		if page.Next != "" {
			q.Cursor = page.Next
			if _, err := st.Search(ctx, q); err != nil {
				t.Fatalf("Search(%+v) from its own Next: %v", q, err)
			}
		}
	})
}
