package audit

import (
	"os"
	"path/filepath"
	"testing"

	"stashd/archive/archivetest"
	"stashd/sim/tgsim"
)

// Whether a multipart set is complete is judged from its bytes, as a user
// judges it (does it extract?), not from its names: a lone x.part1.rar
// that is a whole archive is complete, and a set that lacks a volume is
// not, even when its names look whole (v.part1.rar and v.part2.rar of a
// three-volume archive: the second volume says a third follows).
func TestSetCompletenessFromBytes(t *testing.T) {
	t.Parallel()
	files := archivetest.Files(7, 3)
	gap := archivetest.RarVolumes(files, 3)
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"lone.part1.rar": archivetest.Rar(files),
		"gap.part1.rar":  gap[0],
		"gap.part3.rar":  gap[2],
		"v.part1.rar":    gap[0],
		"v.part2.rar":    gap[1],
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w := tgsim.NewWorld(tgsim.Config{Seed: 1})
	g := tgsim.NewGenerator(w, tgsim.Scenario{Seed: 1, Sources: 1})
	if err := g.PostDir(dir); err != nil {
		t.Fatal(err)
	}
	truth := FromWorld(w, g, nil, nil, nil)
	want := map[string]struct {
		incomplete bool
		parts      int
	}{
		"lone.part1.rar": {false, 1},
		"gap.part1.rar":  {true, 2},
		"v.part1.rar":    {true, 2},
	}
	seen := 0
	for _, p := range truth.Packages {
		wp, ok := want[p.Name]
		if !ok {
			continue
		}
		seen++
		if p.Incomplete != wp.incomplete || len(p.Parts) != wp.parts {
			t.Errorf("%s: incomplete %v with %d parts, want %v with %d", p.Name, p.Incomplete, len(p.Parts), wp.incomplete, wp.parts)
		}
	}
	if seen != 3 {
		t.Fatalf("judged %d of the 3 sets posted: %+v", seen, truth.Packages)
	}
	// The complete sets are expected delivered: they count as packages.
	if n := len(truth.unique()); n != 1 {
		t.Errorf("%d unique complete packages, want 1 (lone)", n)
	}
}
