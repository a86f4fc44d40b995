package archive

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"stashd/archive/archivetest"
)

var (
	tailOne = []archivetest.File{{Name: "first/one.bin", Data: bytes.Repeat([]byte("1"), 3000)}}
	tailTwo = []archivetest.File{{Name: "second/two.bin", Data: bytes.Repeat([]byte("2"), 4000)}}
)

// A plain tar in part 1, another archive's first part in part 2, and a
// last part of zeros (the other tar's record padding): three parts that
// are not one archive's.
func TestListTarMiddlePartOfAnotherArchive(t *testing.T) {
	other := archivetest.Tar(tailTwo)
	parts := [][]byte{archivetest.Tar(tailOne), other[:2048], make([]byte, 4096)}
	l, err := List(context.Background(), FormatTar, writeVolumes(t, parts...), Limits{})
	if !errors.Is(err, ErrNotOneArchive) {
		t.Fatalf("listed %d entries (%v), err %v; want ErrNotOneArchive", len(l.Entries), l.Entries[0].Path, err)
	}
}

// A plain tar whose end lies in the last part, followed in that part by a
// whole other tar: refused, as it is compressed.
func TestListTarAnotherTarInTheLastPart(t *testing.T) {
	a := archivetest.Tar(tailOne)
	parts := [][]byte{a[:len(a)-1], append(a[len(a)-1:], archivetest.Tar(tailTwo)...)}
	l, err := List(context.Background(), FormatTar, writeVolumes(t, parts...), Limits{})
	if !errors.Is(err, ErrNotOneArchive) {
		t.Errorf("plain tar: listed %d entries, err %v; want ErrNotOneArchive", len(l.Entries), err)
	}
	g := gzipOf(t, append(append([]byte{}, a...), archivetest.Tar(tailTwo)...))
	l, err = List(context.Background(), FormatTarGz, writeVolumes(t, g[:len(g)-1], g[len(g)-1:]), Limits{})
	if !errors.Is(err, ErrNotOneArchive) {
		t.Errorf("tar.gz: listed %d entries, err %v; want ErrNotOneArchive", len(l.Entries), err)
	}
}

// tar.gz in part 1; part 2 a gzip member holding one block of non-zero
// junk and then a whole tar, whose files GNU tar -i extracts: refused.
func TestListTarGzJunkBlockThenATar(t *testing.T) {
	junk := bytes.Repeat([]byte("J"), 512)
	second := gzipOf(t, append(junk, archivetest.Tar(tailTwo)...))
	parts := [][]byte{archivetest.TarGz(tailOne), second}
	l, err := List(context.Background(), FormatTarGz, writeVolumes(t, parts...), Limits{})
	if !errors.Is(err, ErrNotOneArchive) {
		t.Errorf("listed %d entries, err %v; want ErrNotOneArchive", len(l.Entries), err)
	}
}

// Two zips, the second with offsets adjusted for the first (zip -A): the
// first part holds none of the archive listed, also when MaxHeaderBytes
// cuts the second's central directory short. Skipped without zip.
func TestListZipAdjustedAfterAWholeZip(t *testing.T) {
	if _, err := exec.LookPath("zip"); err != nil {
		t.Skip("zip command not installed")
	}
	second := append(append([]archivetest.File{}, tailTwo...), archivetest.File{Name: "second/three.bin", Data: []byte("3")})
	parts := writeVolumes(t, adjustedAfter(t, archivetest.Zip(tailOne), archivetest.Zip(second))...)
	for _, lim := range []Limits{{}, {MaxHeaderBytes: 80}} { // 80: room for the first directory entry only
		l, err := List(context.Background(), FormatZip, parts, lim)
		if !errors.Is(err, ErrNotOneArchive) {
			t.Errorf("limits %+v: listed %d entries (truncated %v), err %v; want ErrNotOneArchive", lim, len(l.Entries), l.Truncated, err)
		}
	}
}

// adjustedAfter returns a followed by b, b's offsets adjusted by zip -A to
// count from a's start, cut back into the two parts.
func adjustedAfter(t *testing.T, a, b []byte) [][]byte {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ab.zip")
	if err := os.WriteFile(f, append(append([]byte{}, a...), b...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("zip", "-A", f).CombinedOutput(); err != nil {
		t.Fatalf("zip -A: %v %s", err, out)
	}
	ab, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ab[:len(a)], a) {
		t.Fatal("zip -A changed the first zip")
	}
	return [][]byte{ab[:len(a)], ab[len(a):]}
}

// The tail of a plain tar in a set (here 4 GiB of zeros, a sparse file) is
// read within the listing's time bound.
func TestListTarTailWithinTheTimeBound(t *testing.T) {
	dir := t.TempDir()
	p1 := filepath.Join(dir, "p1")
	p2 := filepath.Join(dir, "p2")
	if err := os.WriteFile(p1, archivetest.Tar(tailOne), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p2)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4 << 30); err != nil { // sparse: 4 GiB of zeros
		t.Fatal(err)
	}
	f.Close()
	start := time.Now()
	l, err := List(context.Background(), FormatTar, []string{p1, p2}, Limits{MaxDuration: 100 * time.Millisecond})
	if took := time.Since(start); took > 10*time.Second || !errors.Is(err, ErrLimit) {
		t.Errorf("listing with a 100 ms bound: %v after %v, %d entries; want the bound's error, long before reading 4 GiB", err, took, len(l.Entries))
	}
}

// A compressed tar cut in two whose last part lacks the stream's last
// bytes (the gzip/xz/zstd/lz4/bz2 trailer) is cut short, as it is in one
// part.
func TestListSetCutShortIsCutShort(t *testing.T) {
	tarData := archivetest.Tar(tailOne)
	for _, tc := range []struct {
		f    Format
		data []byte
		cut  int
	}{
		{FormatTarGz, archivetest.TarGz(tailOne), 4},
		{FormatTarXz, archivetest.TarXz(tailOne), 12},
		{FormatTarXz, archivetest.TarXz(tailOne), 30},
		{FormatTarZst, archivetest.TarZst(tailOne), 4},
		{FormatTarLz4, archivetest.TarLz4(tailOne), 4},
		{FormatTarBz2, bz2Of(t, tarData), 4},
		{FormatTarBz2, bz2Of(t, tarData), 8},
	} {
		d := tc.data[:len(tc.data)-tc.cut]
		_, err1 := List(context.Background(), tc.f, writeVolumes(t, d), Limits{})
		h := len(d) / 2
		_, err2 := List(context.Background(), tc.f, writeVolumes(t, d[:h], d[h:]), Limits{})
		if (err1 == nil) != (err2 == nil) {
			t.Errorf("%v missing its last %d bytes: one part err %v; two parts err %v", tc.f, tc.cut, err1, err2)
		}
	}
}

func bz2Of(t *testing.T, b []byte) []byte {
	t.Helper()
	cmd := exec.Command("bzip2", "-c")
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		t.Skip("bzip2 command not installed")
	}
	return out
}

// Tars cut at many points near their end and split in two list without
// the walker's panic (an internal error).
func TestListSetShortTailsDoNotPanic(t *testing.T) {
	a := archivetest.Tar(tailOne)
	for _, f := range []Format{FormatTar, FormatTarGz, FormatTarXz, FormatTarZst, FormatTarLz4} {
		for cut := 1; cut < 1100; cut += 7 {
			var d []byte
			switch f {
			case FormatTar:
				d = a[:len(a)-cut]
			case FormatTarGz:
				d = gzipOf(t, a[:len(a)-cut])
			case FormatTarXz:
				d = xzOf(t, a[:len(a)-cut])
			default:
				continue
			}
			_, err := List(context.Background(), f, writeVolumes(t, d[:len(d)/2], d[len(d)/2:]), Limits{})
			var le *ListError
			if errors.As(err, &le) && bytes.Contains([]byte(le.Reason), []byte("internal error")) {
				t.Errorf("%v cut %d: %v", f, cut, err)
			}
		}
	}
}

// A valid zip (unzip, 7zz accept it) whose central directory lists its
// entries in another order than their local headers (small.txt, at 5037,
// before big.bin, at 0), cut in a byte split at 3000. Listed whole it is
// one archive, and so it is when its listing stops at MaxEntries: the
// directory's other entries still say where the archive starts.
func TestListZipSplitCutByMaxEntriesIsOneArchive(t *testing.T) {
	z, err := os.ReadFile("testdata/reordered-directory.zip")
	if err != nil {
		t.Fatal(err)
	}
	parts := writeVolumes(t, z[:3000], z[3000:])
	if _, err := List(context.Background(), FormatZip, parts, Limits{}); err != nil {
		t.Fatalf("whole listing: %v", err)
	}
	l, err := List(context.Background(), FormatZip, parts, Limits{MaxEntries: 1})
	if err != nil {
		t.Errorf("MaxEntries 1: %d entries, truncated %v, err %v; want a truncated listing", len(l.Entries), l.Truncated, err)
	}
}
