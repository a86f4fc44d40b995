package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"stashd/archive/archivetest"
)

// posted is one file as posted: its name and bytes.
type posted struct {
	name string
	data []byte
}

// candidates writes the posted files and returns them as candidates.
func candidates(t *testing.T, files ...posted) []Candidate {
	t.Helper()
	dir := t.TempDir()
	out := make([]Candidate, len(files))
	for i, f := range files {
		path := filepath.Join(dir, "f"+string(rune('a'+i)))
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(f.data)
		out[i] = Candidate{Name: f.name, Path: path, Hash: hex.EncodeToString(sum[:]), Size: int64(len(f.data))}
	}
	return out
}

// A part posted twice with different bytes, same name and size (one copy's
// header damaged), and a truncated copy of another part: the set is
// assembled from the copies that make it valid, the others rejected with
// the reason, and a byte-identical repost is rejected as the same bytes.
func TestAssembleChoosesValidCopies(t *testing.T) {
	t.Parallel()
	vols := archivetest.RarVolumes(sampleFiles(), 3)
	damaged := bytes.Clone(vols[1])
	damaged[len(rar5Sig)+6] ^= 0xff // inside the main header: its CRC fails
	cands := candidates(t,
		posted{"x.part1.rar", vols[0]},
		posted{"x.part2.rar", damaged},
		posted{"x.part3.rar", vols[2][:len(vols[2])/2]},
		posted{"x.part2.rar", vols[1]},
		posted{"x.part3.rar", vols[2]},
		posted{"x.part1.rar", vols[0]},
	)
	a := Assemble(context.Background(), cands, Limits{})
	if !a.Complete || !a.Verified || a.Err != nil {
		t.Fatalf("assembly %+v", a)
	}
	if !slices.Equal(a.Order, []int{0, 3, 4}) {
		t.Errorf("order %v, want [0 3 4]", a.Order)
	}
	checkEntries(t, a.Listing.Entries, wantEntries(sampleFiles()))
	reasons := map[int]string{}
	for _, r := range a.Rejected {
		reasons[r.Index] = r.Reason
	}
	if len(reasons) != 3 || !strings.Contains(reasons[1], "does not make the set valid") ||
		!strings.Contains(reasons[2], "makes the set valid") || !strings.Contains(reasons[5], "same bytes as x.part1.rar") {
		t.Errorf("rejected %+v", a.Rejected)
	}
}

// Missing volumes are named as they would be posted: a gap in the names
// (x.r00 of an old-style set), a last volume the archive says follows
// (x.r01), the missing tail of a byte-split zip or 7z.
func TestAssembleNamesMissingVolumes(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	rar := rar4Volumes(files, 3)
	zip := archivetest.Split(archivetest.Zip(files), 3)
	sz := archivetest.Split(archivetest.SevenZip(files), 3)
	cases := []struct {
		name    string
		posted  []posted
		missing string
	}{
		{"old-style rar, middle", []posted{{"x.rar", rar[0]}, {"x.r01", rar[2]}}, "x.r00"},
		{"old-style rar, last", []posted{{"x.rar", rar[0]}, {"x.r00", rar[1]}}, "x.r01"},
		{"zip byte split, last", []posted{{"x.zip.001", zip[0]}, {"x.zip.002", zip[1]}}, "x.zip.003"},
		{"7z byte split, last", []posted{{"x.7z.002", sz[1]}, {"x.7z.001", sz[0]}}, "x.7z.003"},
		{"rar parts, first", []posted{{"x.part2.rar", rar[1]}, {"x.part3.rar", rar[2]}}, "x.part1.rar"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := Assemble(context.Background(), candidates(t, c.posted...), Limits{})
			if a.Complete || len(a.Missing) != 1 || a.Missing[0] != c.missing || !strings.HasPrefix(a.Reason, c.missing+" missing") {
				t.Errorf("assembly complete %v missing %q reason %q, want %s missing", a.Complete, a.Missing, a.Reason, c.missing)
			}
		})
	}
	// And whole, each verifies.
	for _, whole := range [][]posted{
		{{"x.r01", rar[2]}, {"x.rar", rar[0]}, {"x.r00", rar[1]}},
		{{"x.zip.001", zip[0]}, {"x.zip.002", zip[1]}, {"x.zip.003", zip[2]}},
	} {
		if a := Assemble(context.Background(), candidates(t, whole...), Limits{}); !a.Complete || !a.Verified {
			t.Errorf("%s: %+v", whole[0].name, a)
		}
	}
}
