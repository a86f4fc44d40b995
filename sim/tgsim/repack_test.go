package tgsim

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"stashd/archive"
	"stashd/tg"
)

// With Repacks set, some steps re-post an earlier zip or rar package's
// files in the other container: other bytes, the same content signature.
// Without it two runs of a seed publish the same.
func TestGeneratorRepacks(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{})
	g := NewGenerator(w, Scenario{Seed: 3, Sources: 2, Repacks: 0.3})
	for range 200 {
		g.Step()
	}
	data := map[tg.MessageKey][]byte{}
	for _, s := range g.Sources() {
		for _, m := range w.Messages(s.Chat) {
			if m.Document != nil {
				data[m.Key()] = w.FileData(m.Document.File.UniqueID)
			}
		}
	}
	sig := func(p ExpectedPackage) []byte {
		t.Helper()
		path := filepath.Join(t.TempDir(), "a")
		if err := os.WriteFile(path, data[p.Parts[0]], 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := archive.List(context.Background(), archive.ParseName(p.Name).Format, []string{path}, archive.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		s, ok := archive.ContentSignature(l.Entries)
		if !ok {
			t.Fatalf("%s: no content signature", p.Name)
		}
		return s
	}
	truth := g.Truth()
	repacks := 0
	for _, p := range truth.Packages {
		if !p.Repack {
			continue
		}
		repacks++
		orig := truth.Packages[p.RepackOf]
		if orig.Hash == p.Hash || orig.Repack || orig.Name == p.Name {
			t.Errorf("repack %s of %s: same bytes or name", p.Name, orig.Name)
		}
		if !bytes.Equal(sig(p), sig(orig)) {
			t.Errorf("repack %s of %s: other content", p.Name, orig.Name)
		}
		if _, ok := truth.Unique()[p.Hash]; ok {
			t.Errorf("repack %s counted as a unique package", p.Name)
		}
	}
	if repacks == 0 {
		t.Fatal("no repack in 200 steps at 0.3")
	}

	plain := NewGenerator(NewWorld(Config{}), Scenario{Seed: 3, Sources: 2})
	again := NewGenerator(NewWorld(Config{}), Scenario{Seed: 3, Sources: 2})
	for range 50 {
		plain.Step()
		again.Step()
	}
	a, b := plain.Truth().Packages, again.Truth().Packages
	if len(a) != len(b) || a[len(a)-1].Hash != b[len(b)-1].Hash {
		t.Error("without repacks the seed's content changed between runs")
	}
}
