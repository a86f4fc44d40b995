package archive

import (
	"context"
	"strings"
	"testing"

	"stashd/archive/archivetest"
)

// rarSetOf returns a RAR set of n volumes (RAR5, or RAR4 when rar4 is
// true) holding one file, name, of size bytes filled with fill.
func rarSetOf(rar4 bool, name string, fill string, size, n int) [][]byte {
	return rarVolumesOf(rar4, []archivetest.File{{Name: name, Data: []byte(strings.Repeat(fill, size/len(fill)))}}, n)
}

// rarVolumesOf returns a RAR set of n volumes (RAR5, or RAR4 when rar4 is
// true) holding files.
func rarVolumesOf(rar4 bool, files []archivetest.File, n int) [][]byte {
	if rar4 {
		return rar4Volumes(files, n)
	}
	return archivetest.RarVolumes(files, n)
}

// A volume of another RAR set put among a set's volumes (the same
// naming, the same volume number and size: a stray x.part2.rar of
// another upload) does not continue the file the volume before it leaves
// unfinished, or continues one it does not: the parts are not one
// archive, whatever their headers' checksums and volume numbers say.
func TestListRarForeignVolumeRefused(t *testing.T) {
	t.Parallel()
	for _, rar4 := range []bool{false, true} {
		a := rarSetOf(rar4, "a/one.bin", "a", 30000, 3)
		b := rarSetOf(rar4, "b/two.bin", "b", 30000, 3)
		// Two files, the second beginning the second volume.
		two := rarVolumesOf(rar4, []archivetest.File{
			{Name: "d/1.bin", Data: []byte(strings.Repeat("1", 15000))},
			{Name: "d/2.bin", Data: []byte(strings.Repeat("2", 15000))}}, 2)
		for set, files := range map[int]int{0: 1, 1: 2} {
			vols := [][][]byte{a, two}[set]
			if l, err := memList(context.Background(), FormatRar, Limits{}, vols...); err != nil || len(l.Entries) != files {
				t.Fatalf("rar4 %v: set %d itself: %d entries, %v", rar4, set, len(l.Entries), err)
			}
		}
		for _, c := range []struct {
			what, says string
			vols       [][]byte
		}{
			{"another set's middle volume", "does not continue", [][]byte{a[0], b[1], a[2]}},
			{"another set's last volume", "does not continue", [][]byte{a[0], a[1], b[2]}},
			{"a volume beginning with a file of its own", "does not continue", [][]byte{a[0], two[1]}},
			{"a volume continuing a file after one that ends whole", "which volume 1 does not leave unfinished", [][]byte{two[0], a[1]}},
		} {
			l, err := memList(context.Background(), FormatRar, Limits{}, c.vols...)
			if err == nil {
				t.Errorf("rar4 %v, %s: listed as one archive (%d entries: %s)", rar4, c.what, len(l.Entries), l.Entries[0].Path)
				continue
			}
			wantListError(t, err, FormatRar, c.says, ErrNotOneArchive)
		}
	}
}
