package main

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"stashd/internal/cataloguetest"
	"stashd/internal/pgtest"
	"stashd/store"
)

// seededURL returns the URL of a catalogue filled by cataloguetest.Seed.
func seededURL(t *testing.T) (string, cataloguetest.Seeded) {
	t.Helper()
	dbURL := pgtest.New(t)
	st, err := store.Open(t.Context(), store.Config{URL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := cataloguetest.Seed(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	return dbURL, s
}

func search(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut strings.Builder
	rc := searchCommand(t.Context(), args, &out, &errOut)
	return out.String(), errOut.String(), rc
}

// The table shows the package holding the file, the file, and t.me links
// to the origin and to each delivered copy; hostile names are escaped.
func TestSearchCommandTable(t *testing.T) {
	t.Parallel()
	dbURL, _ := seededURL(t)
	out, errOut, rc := search(t, "dragon_BUST.stl", "--database-url", dbURL)
	if rc != 0 {
		t.Fatalf("exit %d: %s", rc, errOut)
	}
	for _, want := range []string{"minis-vol1.7z", "models/dragons/Dragon_Bust.stl (12.0 MiB)", "300.0 MiB",
		"origin https://t.me/c/1000000001/10", "copy (part 1) https://t.me/c/2000000001/100", "copy (part 2) https://t.me/c/2000000001/101"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _, rc = search(t, "--database-url", dbURL, "--format", "zip", "red")
	if rc != 0 || strings.ContainsAny(out, "\x1b") || !strings.Contains(out, `evil\x1b[31mred\nline.stl`) {
		t.Errorf("exit %d; control characters not escaped:\n%q", rc, out)
	}
	if _, errOut, rc := search(t, "--database-url", dbURL, "--min-size", "huge", "x"); rc != 2 || !strings.Contains(errOut, "huge") {
		t.Errorf("bad size: exit %d, %q", rc, errOut)
	}
	if _, _, rc := search(t, "--database-url", dbURL, "two", "words"); rc != 2 {
		t.Errorf("two queries: exit %d, want 2", rc)
	}
}

func TestSearchCommandJSONPages(t *testing.T) {
	t.Parallel()
	dbURL, s := seededURL(t)
	type result struct {
		Hits []struct {
			ID     int64  `json:"package_id"`
			File   string `json:"file"`
			Origin struct {
				Link string `json:"link"`
			} `json:"origin"`
			Copies []struct {
				Part int    `json:"part"`
				Link string `json:"link"`
			} `json:"copies"`
		} `json:"hits"`
		Next string `json:"next"`
	}
	var seen []int64
	args := []string{"dragon", "--json", "--limit", "1", "--database-url", dbURL}
	for range 3 {
		out, errOut, rc := search(t, args...)
		if rc != 0 {
			t.Fatalf("exit %d: %s", rc, errOut)
		}
		var r result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		for _, h := range r.Hits {
			seen = append(seen, h.ID)
			if h.ID == s.Dragon && (h.File != "models/dragons/Dragon_Bust.stl" || len(h.Copies) != 2 || h.Origin.Link == "") {
				t.Errorf("dragon hit %+v, want its file, origin link and two copies", h)
			}
		}
		if r.Next == "" {
			break
		}
		args = append(args, "--after", r.Next)
	}
	if len(seen) != 2 || seen[0] != s.Terrain || seen[1] != s.Dragon {
		t.Errorf("pages gave %v, want [%d %d]", seen, s.Terrain, s.Dragon)
	}
}

// stashd search works with a role that may only read the catalogue.
func TestSearchCommandReadOnlyRole(t *testing.T) {
	t.Parallel()
	dbURL, _ := seededURL(t)
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	var db string
	if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	role := "reader_" + db
	for _, sql := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE ON SCHEMA public TO " + role,
		"GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + role,
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "+role)
		_, _ = conn.Exec(context.Background(), "REVOKE ALL ON SCHEMA public FROM "+role)
		_, _ = conn.Exec(context.Background(), "DROP ROLE "+role)
	})
	readerURL := asUser(t, dbURL, role)
	out, errOut, rc := search(t, "dragon_bust", "--database-url", readerURL)
	if rc != 0 || !strings.Contains(out, "Dragon_Bust.stl") {
		t.Errorf("as a read-only role: exit %d, %s\n%s", rc, errOut, out)
	}
}

// asUser returns connStr connecting as user.
func asUser(t *testing.T, connStr, user string) string {
	t.Helper()
	if strings.HasPrefix(connStr, "postgres://") || strings.HasPrefix(connStr, "postgresql://") {
		u, err := url.Parse(connStr)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(user)
		return u.String()
	}
	return connStr + " user=" + user
}

// A page that read its stretch of the catalogue without a match (a query
// of one or two characters) says so and how to read on, rather than that
// nothing matches.
func TestSearchCommandEmptyPageWithMore(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	printSearch(&out, "ab", store.SearchPage{Next: "MC4xMjM"})
	if s := out.String(); strings.Contains(s, "no results for") || !strings.Contains(s, "more: --after MC4xMjM") {
		t.Errorf("empty page with a cursor printed:\n%s", s)
	}
	out.Reset()
	printSearch(&out, "nothing like it", store.SearchPage{})
	if s := out.String(); s != "no results for \"nothing like it\"\n" {
		t.Errorf("last empty page printed %q", s)
	}
}

// The human output is one aligned row per package with the entry that
// matched, then the links.
func TestSearchCommandAlignedTable(t *testing.T) {
	t.Parallel()
	dbURL, _ := seededURL(t)
	out, errOut, rc := search(t, "--database-url", dbURL, "")
	if rc != 0 {
		t.Fatalf("exit %d: %s", rc, errOut)
	}
	table, _, _ := strings.Cut(out, "\n\n")
	lines := strings.Split(table, "\n")
	head := lines[0]
	cols := []string{"PACKAGE", "MATCHING ENTRY", "SIZE", "SOURCE", "CATALOGUED"}
	for _, l := range lines[1:] {
		for _, c := range cols {
			at := strings.Index(head, c)
			if at <= 0 || len(l) <= at || l[at-1] != ' ' || l[at] == ' ' {
				t.Errorf("column %s not aligned in row %q (header %q)", c, l, head)
			}
		}
	}
	if len(lines) < 3 {
		t.Errorf("want a row per package:\n%s", out)
	}
	out, _, rc = search(t, "--database-url", dbURL, "no-such-thing-anywhere")
	if rc != 0 || out != "no results for \"no-such-thing-anywhere\"\n" {
		t.Errorf("exit %d, output %q", rc, out)
	}
}

// A hit's links to other packages are printed one a line, the other
// package's name escaped.
func TestPrintSearchShowsLinks(t *testing.T) {
	var b strings.Builder
	printSearch(&b, "part", store.SearchPage{Hits: []store.SearchHit{{
		Package: store.Package{ID: 3, Name: "part.zip"},
		Links: []store.HitLink{{Relation: "contained in", Other: 7, OtherName: "whole\u202e.zip"},
			{Relation: "repacked as", Other: 9, OtherName: "part.7z"}},
	}}})
	out := b.String()
	for _, want := range []string{"3 contained in 7 whole\\u202e.zip\n", "3 repacked as 9 part.7z\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
