package tgsim

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"stashd/archive"
	"stashd/tg"
)

func TestGeneratorScenarioLayout(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{})
	g := NewGenerator(w, Scenario{Seed: 1, Sources: 3, ForumTopics: 4, Accounts: 2, Destinations: 2})
	if got := g.Accounts(); !slices.Equal(got, []string{"acct1", "acct2"}) {
		t.Fatalf("accounts = %v", got)
	}
	srcs := g.Sources()
	wantKinds := []tg.ChatKind{tg.KindChannel, tg.KindSupergroup, tg.KindChannel, tg.KindForum}
	wantAccts := []string{"acct1", "acct2", "acct1", "acct2"}
	if len(srcs) != 4 {
		t.Fatalf("sources = %+v", srcs)
	}
	for i, s := range srcs {
		if s.Kind != wantKinds[i] || s.Account != wantAccts[i] {
			t.Errorf("source %d = %+v, want kind %s watched by %s", i, s, wantKinds[i], wantAccts[i])
		}
	}
	if len(srcs[3].Topics) != 4 || srcs[0].Topics != nil {
		t.Errorf("topics: forum %v, channel %v", srcs[3].Topics, srcs[0].Topics)
	}
	if len(g.Destinations()) != 2 {
		t.Fatalf("destinations = %v", g.Destinations())
	}

	// Membership as documented: a source's only member is its watcher; every
	// account is in every destination.
	c := w.Client("acct2")
	defer c.Close()
	ctx := t.Context()
	if err := c.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetChat(ctx, srcs[0].Chat); err == nil {
		t.Error("acct2 sees acct1's source")
	}
	if _, err := c.GetChat(ctx, srcs[1].Chat); err != nil {
		t.Errorf("acct2 does not see its own source: %v", err)
	}
	for _, d := range g.Destinations() {
		if _, err := c.GetChat(ctx, d); err != nil {
			t.Errorf("acct2 does not see destination %d: %v", d, err)
		}
	}
	me, err := c.GetMe(ctx)
	if err != nil || !me.IsPremium {
		t.Errorf("acct2 (even) should be Premium: %+v, %v", me, err)
	}
}

func generate(seed int64, steps int) (*World, *Generator) {
	w := NewWorld(Config{Seed: seed})
	g := NewGenerator(w, Scenario{Seed: seed, Sources: 3, ForumTopics: 3, Accounts: 2})
	for range steps {
		g.Step()
	}
	return w, g
}

func TestGeneratorDeterministic(t *testing.T) {
	t.Parallel()
	_, g1 := generate(42, 40)
	_, g2 := generate(42, 40)
	_, g3 := generate(43, 40)
	t1, t2, t3 := g1.Truth(), g2.Truth(), g3.Truth()
	if len(t1.Packages) == 0 {
		t.Fatal("40 steps published no package")
	}
	if fmt.Sprint(t1) != fmt.Sprint(t2) {
		t.Fatal("same seed, different truth")
	}
	if fmt.Sprint(t1) == fmt.Sprint(t3) {
		t.Fatal("different seeds, same truth")
	}
}

// The Truth must describe exactly what is in the world: the parts exist,
// the hashes are those of their bytes, the names group as stashd groups
// them, listings fail exactly for corrupt packages, and the flags agree.
func TestGeneratorTruthMatchesWorld(t *testing.T) {
	t.Parallel()
	w, g := generate(7, 100)
	truth := g.Truth()
	dir := t.TempDir()

	byKey := make(map[tg.MessageKey]tg.Message)
	holes := 0
	for _, s := range g.Sources() {
		msgs := w.Messages(s.Chat)
		for i, m := range msgs {
			byKey[m.Key()] = m
			if i > 0 && m.ID.ServerID() != msgs[i-1].ID.ServerID()+1 {
				holes++
			}
		}
	}
	if holes == 0 {
		t.Error("no deletion left a hole in 100 steps")
	}

	seen := make(map[[32]byte]bool)
	var multi, albums, dups, corrupt, incomplete, volumeMissing, hostileNames, encrypted int
	for i, p := range truth.Packages {
		h := sha256.New()
		var names []archive.Name
		var paths []string
		album := int64(0)
		for j, k := range p.Parts {
			m, ok := byKey[k]
			if !ok || m.Document == nil {
				t.Fatalf("package %d (%s): part %s is not a live document", i, p.Name, k)
			}
			data := w.FileData(m.Document.File.UniqueID)
			h.Write(data)
			names = append(names, archive.ParseName(m.Document.FileName))
			path := filepath.Join(dir, fmt.Sprintf("%d-%d-%s", i, j, sanitize(m.Document.FileName)))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, path)
			if j == 0 {
				album = m.AlbumID
			} else if m.AlbumID != album {
				t.Fatalf("package %d: parts in different albums", i)
			}
		}
		if [32]byte(h.Sum(nil)) != p.Hash {
			t.Fatalf("package %d (%s): hash does not match the parts' bytes", i, p.Name)
		}
		if p.Duplicate != seen[p.Hash] {
			t.Fatalf("package %d (%s): Duplicate=%v but seen before=%v", i, p.Name, p.Duplicate, seen[p.Hash])
		}
		if !p.Incomplete {
			seen[p.Hash] = true
		}
		for _, n := range names {
			if !n.IsArchive() {
				t.Fatalf("package %d: part %q is not an archive name", i, n.Base)
			}
		}
		order := archive.OrderParts(names)
		isSet := names[0].IsMultipart()
		switch {
		case p.VolumeMissing:
			volumeMissing++
			_, err := archive.List(t.Context(), names[0].Format, paths, archive.Limits{})
			if !p.Incomplete || !order.Complete || !errors.Is(err, archive.ErrVolumeMissing) {
				t.Fatalf("package %d (%s): a set without its last volume must look complete by name and miss a volume by listing: %+v, %v", i, p.Name, order, err)
			}
			continue
		case p.Incomplete:
			incomplete++
			if order.Complete {
				t.Fatalf("package %d (%s): incomplete set looks complete to OrderParts", i, p.Name)
			}
			continue
		case isSet && (!order.Complete || !slices.Equal(order.Order, seq(len(names)))):
			t.Fatalf("package %d (%s): parts not a complete set in order: %+v", i, p.Name, order)
		}
		if len(p.Parts) > 1 {
			multi++
		}
		if album != 0 {
			albums++
		}
		if p.Duplicate {
			dups++
		}
		if p.Corrupt {
			corrupt++
		}

		// Listing fails exactly for corrupt packages.
		var listErr error
		var listings []archive.Listing
		if isSet {
			var l archive.Listing
			l, listErr = archive.List(t.Context(), names[0].Format, paths, archive.Limits{})
			listings = append(listings, l)
		} else {
			for j, path := range paths {
				l, err := archive.List(t.Context(), names[j].Format, []string{path}, archive.Limits{})
				if err != nil {
					listErr = err
				}
				listings = append(listings, l)
			}
		}
		if strings.ContainsRune(p.Name, 0) {
			hostileNames++
		}
		for _, l := range listings {
			if l.Encrypted {
				encrypted++
			}
		}
		if p.Corrupt != (listErr != nil) {
			t.Errorf("package %d (%s): Corrupt=%v, listing error %v", i, p.Name, p.Corrupt, listErr)
		}
	}
	for what, n := range map[string]int{"multipart": multi, "album": albums, "duplicate": dups, "corrupt": corrupt,
		"incomplete": incomplete, "volume-missing": volumeMissing, "NUL-named": hostileNames, "encrypted": encrypted} {
		if n == 0 {
			t.Errorf("100 steps published no %s package", what)
		}
	}

	uniq := truth.Unique()
	if len(uniq) != len(seen) {
		t.Fatalf("Unique has %d packages, want %d distinct complete hashes", len(uniq), len(seen))
	}
	for h, p := range uniq {
		if p.Hash != h || p.Duplicate || p.Incomplete {
			t.Fatalf("Unique[%x] = %+v", h[:4], p)
		}
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestTruthUnique(t *testing.T) {
	t.Parallel()
	a, b, c := [32]byte{1}, [32]byte{2}, [32]byte{3}
	key := func(n int64) []tg.MessageKey { return []tg.MessageKey{{Chat: -1, Message: tg.MessageIDFromServer(n)}} }
	truth := Truth{Packages: []ExpectedPackage{
		{Hash: b, Name: "b", Parts: key(1), Incomplete: true},
		{Hash: a, Name: "a", Parts: key(2)},
		{Hash: a, Name: "a-again", Parts: key(3), Duplicate: true},
		{Hash: c, Name: "c", Parts: key(4), Corrupt: true},
	}}
	u := truth.Unique()
	if len(u) != 2 || u[a].Name != "a" || u[c].Name != "c" {
		t.Fatalf("Unique = %+v", u)
	}
	if _, ok := u[b]; ok {
		t.Fatal("an incomplete set is in Unique")
	}
}

func TestPostDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"a.zip":       "A",
		"b.part1.rar": "B1", "b.part2.rar": "B2",
		"c.z01": "C1", "c.z02": "C2", "c.zip": "C3",
		"d.7z.001": "D1", "d.7z.003": "D3",
		"e.zip":      "A", // same bytes as a.zip
		"readme.txt": "hello",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.zip"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := NewWorld(Config{})
	g := NewGenerator(w, Scenario{Sources: 2})
	if err := g.PostDir(dir); err != nil {
		t.Fatal(err)
	}
	hash := func(parts ...string) [32]byte {
		h := sha256.New()
		for _, p := range parts {
			h.Write([]byte(files[p]))
		}
		return [32]byte(h.Sum(nil))
	}
	want := []ExpectedPackage{
		{Name: "a.zip", Hash: hash("a.zip")},
		{Name: "b.part1.rar", Hash: hash("b.part1.rar", "b.part2.rar")},
		{Name: "c.z01", Hash: hash("c.z01", "c.z02", "c.zip")},
		{Name: "d.7z.001", Hash: hash("d.7z.001", "d.7z.003"), Incomplete: true},
		{Name: "e.zip", Hash: hash("e.zip"), Duplicate: true},
	}
	got := g.Truth().Packages
	if len(got) != len(want) {
		t.Fatalf("got %d packages, want %d: %+v", len(got), len(want), got)
	}
	srcs := g.Sources()
	for i, p := range got {
		wp := want[i]
		if p.Name != wp.Name || p.Hash != wp.Hash || p.Incomplete != wp.Incomplete || p.Duplicate != wp.Duplicate {
			t.Errorf("package %d = %s (incomplete %v, duplicate %v), want %s (%v, %v)",
				i, p.Name, p.Incomplete, p.Duplicate, wp.Name, wp.Incomplete, wp.Duplicate)
		}
		// Round robin by package; parts consecutive in one chat.
		for j, k := range p.Parts {
			if k.Chat != p.Parts[0].Chat || (j > 0 && k.Message.ServerID() != p.Parts[j-1].Message.ServerID()+1) {
				t.Errorf("package %s: parts %v are not consecutive in one chat", p.Name, p.Parts)
			}
		}
		if p.Parts[0].Chat != srcs[i%2].Chat {
			t.Errorf("package %d posted to %d, want %d", i, p.Parts[0].Chat, srcs[i%2].Chat)
		}
	}
	// readme.txt was posted too (as the 6th group), but is no package.
	total := len(w.Messages(srcs[0].Chat)) + len(w.Messages(srcs[1].Chat))
	if total != len(files) {
		t.Fatalf("posted %d messages, want %d", total, len(files))
	}
}
