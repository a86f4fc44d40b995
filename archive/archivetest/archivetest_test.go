package archivetest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bodgit/sevenzip"
	"github.com/nwaples/rardecode/v2"
)

// sample returns a mix of directories, empty files, small and larger files,
// with a non-ASCII name, varied by seed so that different seeds differ.
func sample(seed int) []File {
	big := bytes.Repeat([]byte(fmt.Sprintf("chunk %d;", seed)), 3000)
	return []File{
		{Name: "docs", Dir: true},
		{Name: "docs/readme.txt", Data: []byte(fmt.Sprintf("hello %d\n", seed))},
		{Name: "docs/empty.txt"},
		{Name: "данные/файл.bin", Data: big},
		{Name: "z.dat", Data: []byte{byte(seed), 1, 2, 3}},
	}
}

// content is what a reader found: name → data ("/" suffix for directories).
type content map[string]string

func want(files []File) content {
	c := content{}
	for _, f := range files {
		if f.Dir {
			c[strings.TrimSuffix(f.Name, "/")+"/"] = ""
		} else {
			c[f.Name] = string(f.Data)
		}
	}
	return c
}

func checkContent(t *testing.T, got, want content) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d entries %v, want %d", len(got), slices.Sorted(mapsKeys(got)), len(want))
	}
	for name, data := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("entry %q missing", name)
			continue
		}
		if g != data {
			t.Errorf("entry %q: got %d bytes, want %d", name, len(g), len(data))
		}
	}
}

func mapsKeys(m content) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestZipReadableByArchiveZip(t *testing.T) {
	t.Parallel()
	files := sample(1)
	z := Zip(files)
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	got := content{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatalf("read %s: %v", f.Name, err)
		}
		got[f.Name] = string(b)
	}
	checkContent(t, got, want(files))
}

func TestTarGzReadableByArchiveTar(t *testing.T) {
	t.Parallel()
	files := sample(2)
	zr, err := gzip.NewReader(bytes.NewReader(TarGz(files)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	got := content{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = string(b)
	}
	checkContent(t, got, want(files))
}

func TestSevenZipReadableByBodgit(t *testing.T) {
	t.Parallel()
	for _, files := range [][]File{sample(3), {{Name: "only-dir", Dir: true}}, {{Name: "one", Data: []byte("x")}}} {
		z := SevenZip(files)
		checkContent(t, readSevenZip(t, bytes.NewReader(z), int64(len(z))), want(files))
	}
}

func readSevenZip(t *testing.T, r io.ReaderAt, size int64) content {
	t.Helper()
	zr, err := sevenzip.NewReader(r, size)
	if err != nil {
		t.Fatal(err)
	}
	got := content{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("read %s: %v", f.Name, err)
		}
		got[f.Name] = string(b)
	}
	return got
}

func TestSevenZipSplitReadableByBodgit(t *testing.T) {
	t.Parallel()
	files := sample(4)
	dir := t.TempDir()
	for i, v := range Split(SevenZip(files), 3) {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("set.7z.%03d", i+1)), v)
	}
	rc, err := sevenzip.OpenReader(filepath.Join(dir, "set.7z.001"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if len(rc.File) != len(files) {
		t.Fatalf("got %d files, want %d", len(rc.File), len(files))
	}
}

func TestRarReadableByRardecode(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 7} {
		t.Run(fmt.Sprintf("volumes=%d", n), func(t *testing.T) {
			t.Parallel()
			files := sample(5 + n)
			vols := RarVolumes(files, n)
			if len(vols) != n {
				t.Fatalf("got %d volumes, want %d", len(vols), n)
			}
			dir := t.TempDir()
			name := filepath.Join(dir, "set.rar")
			for i, v := range vols {
				if n > 1 {
					name = filepath.Join(dir, fmt.Sprintf("set.part%d.rar", i+1))
				}
				writeFile(t, name, v)
			}
			first := filepath.Join(dir, "set.rar")
			if n > 1 {
				first = filepath.Join(dir, "set.part1.rar")
			}
			rc, err := rardecode.OpenReader(first)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got := content{}
			for {
				h, err := rc.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(rc)
				if err != nil {
					t.Fatalf("read %s: %v", h.Name, err) // also checks the data CRCs
				}
				name := h.Name
				if h.IsDir {
					name += "/"
				}
				got[name] = string(b)
			}
			checkContent(t, got, want(files))
			if n > 1 && len(rc.Volumes()) != n {
				t.Errorf("rardecode used %d volumes, want %d", len(rc.Volumes()), n)
			}
		})
	}
}

func TestZipSplitHasPerDiskOffsets(t *testing.T) {
	t.Parallel()
	files := sample(6)
	parts := ZipSplit(files, 3)
	if len(parts) != 3 {
		t.Fatalf("got %d parts, want 3", len(parts))
	}
	if !bytes.HasPrefix(parts[0], []byte("PK\x07\x08")) {
		t.Error("first part lacks the split signature")
	}
	// The final part holds the directory and an end record saying disk 3 of 3.
	last := parts[2]
	if got := int(last[len(last)-22+4]); got != 2 {
		t.Errorf("end record disk = %d, want 2", got)
	}
	if have7z(t) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "s.z01"), parts[0])
		writeFile(t, filepath.Join(dir, "s.z02"), parts[1])
		writeFile(t, filepath.Join(dir, "s.zip"), parts[2])
		out := run7z(t, "t", filepath.Join(dir, "s.zip"))
		if !strings.Contains(out, "Everything is Ok") {
			t.Errorf("7z rejects the split set:\n%s", out)
		}
	}
}

func TestBuildersAreDeterministicAndSeedSensitive(t *testing.T) {
	t.Parallel()
	builders := map[string]func([]File) []byte{
		"zip": Zip, "tar": Tar, "tar.gz": TarGz, "tar.xz": TarXz, "tar.zst": TarZst, "7z": SevenZip, "rar": Rar,
	}
	for name, build := range builders {
		a, b, c := build(sample(1)), build(sample(1)), build(sample(2))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: same files gave different bytes", name)
		}
		if bytes.Equal(a, c) {
			t.Errorf("%s: different files gave the same bytes", name)
		}
	}
}

func TestSplitCoversData(t *testing.T) {
	t.Parallel()
	data := []byte("0123456789")
	for _, n := range []int{-1, 1, 3, 10, 12} {
		parts := Split(data, n)
		if want := max(n, 1); len(parts) != want {
			t.Errorf("Split(%d): %d parts, want %d", n, len(parts), want)
		}
		if got := bytes.Join(parts, nil); !bytes.Equal(got, data) {
			t.Errorf("Split(%d) joined = %q", n, got)
		}
	}
}

func TestZipManyReadableByArchiveZip(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	const n = 70_000 // past 65535: zip64 end records
	if err := ZipMany(&buf, n, func(b []byte, i int) []byte { return fmt.Appendf(b, "f%06d", i) }); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != n || zr.File[n-1].Name != fmt.Sprintf("f%06d", n-1) {
		t.Fatalf("got %d files, last %q", len(zr.File), zr.File[len(zr.File)-1].Name)
	}
}

func TestCorruptionsDamage(t *testing.T) {
	t.Parallel()
	files := sample(7)
	for _, kind := range []Corruption{ZipTruncated, ZipBadDirectory, ZipClaimMillion, ZipDirectoryOverrun} {
		z := Corrupt(kind, files)
		if zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z))); err == nil && len(zr.File) == len(files) {
			t.Errorf("%s: archive/zip still reads the archive whole", kind)
		}
	}
	bad := Corrupt(SevenZipBadHeaderCRC, files)
	if _, err := sevenzip.NewReader(bytes.NewReader(bad), int64(len(bad))); err == nil {
		t.Errorf("%s: bodgit/sevenzip still reads the archive", SevenZipBadHeaderCRC)
	}
	// bodgit/sevenzip does not check the claimed header size against the
	// file, so check the claim itself: 1 GiB, under a valid start header CRC.
	if z := Corrupt(SevenZipHugeHeader, files); binary.LittleEndian.Uint64(z[20:]) != 1<<30 || crc(z[12:32]) != binary.LittleEndian.Uint32(z[8:]) {
		t.Errorf("%s: start header does not claim a valid 1 GiB header", SevenZipHugeHeader)
	}
	for _, kind := range []Corruption{RarBadHeaderCRC, RarTruncated} {
		r, err := rardecode.NewReader(bytes.NewReader(Corrupt(kind, files)))
		for err == nil {
			if _, err = r.Next(); err == nil {
				_, err = io.Copy(io.Discard, r)
			}
		}
		if errors.Is(err, io.EOF) {
			t.Errorf("%s: rardecode reads the archive without error", kind)
		}
	}
}

func TestSevenZipAndRarAccepted7zCLI(t *testing.T) {
	t.Parallel()
	if !have7z(t) {
		t.Skip("7z command not installed (apt-get install p7zip-full)")
	}
	dir := t.TempDir()
	files := sample(8)
	for name, data := range map[string][]byte{"a.7z": SevenZip(files), "a.rar": Rar(files)} {
		p := filepath.Join(dir, name)
		writeFile(t, p, data)
		if out := run7z(t, "t", p); !strings.Contains(out, "Everything is Ok") {
			t.Errorf("7z t %s:\n%s", name, out)
		}
	}
}

func have7z(t *testing.T) bool {
	t.Helper()
	_, err := exec.LookPath("7z")
	return err == nil
}

func run7z(t *testing.T, args ...string) string {
	t.Helper()
	out, _ := exec.Command("7z", args...).CombinedOutput()
	return string(out)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFilesDeterministicAndSeeded(t *testing.T) {
	t.Parallel()
	a, b, c := Files(1, 5), Files(1, 5), Files(2, 5)
	if len(a) != 6 || !a[0].Dir {
		t.Fatalf("got %d files, first %+v", len(a), a[0])
	}
	if !bytes.Equal(Zip(a), Zip(b)) {
		t.Error("same seed gave different archives")
	}
	if bytes.Equal(Zip(a), Zip(c)) || a[1].Name == c[1].Name {
		t.Error("different seeds gave the same archive")
	}
}
