package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"stashd/archive"
	"stashd/archive/archivetest"
)

// HashParts must give the content hash of the catalogue (SHA-256 over the
// parts in order) and each part's own hash, for one part as for several.
func TestHashParts(t *testing.T) {
	dir := t.TempDir()
	parts := [][]byte{bytes.Repeat([]byte("a"), 300<<10), []byte("second part"), {}}
	var paths []string
	for i, b := range parts {
		p := filepath.Join(dir, string(rune('a'+i)))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for n := 1; n <= len(parts); n++ {
		got, err := HashParts(paths[:n])
		if err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(bytes.Join(parts[:n], nil))
		if !bytes.Equal(got.Content, want[:]) {
			t.Errorf("%d parts: content hash %x, want %x", n, got.Content, want)
		}
		for i := range n {
			ps := sha256.Sum256(parts[i])
			if !bytes.Equal(got.Parts[i], ps[:]) || got.Sizes[i] != int64(len(parts[i])) {
				t.Errorf("%d parts: part %d hash %x size %d", n, i, got.Parts[i], got.Sizes[i])
			}
		}
	}
	if _, err := HashParts([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing file hashed without error")
	}
}

// HashList hashes a compressed tar from the listing's own read and must
// give exactly HashParts' hashes and List's listing, for one part and for
// a split set, when the listing stops early (MaxEntries) and the rest is
// hashed after it, and when the bytes are another format than the name's.
func TestHashListOneRead(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var files []archivetest.File
	for i := range 8 {
		b := make([]byte, 200<<10)
		for j := range b {
			b[j] = byte(rng.UintN(256))
		}
		files = append(files, archivetest.File{Name: fmt.Sprintf("dir/f%d.bin", i), Data: b})
	}
	dir := t.TempDir()
	write := func(name string, parts [][]byte) []string {
		var paths []string
		for i, b := range parts {
			p := filepath.Join(dir, fmt.Sprintf("%s.%03d", name, i+1))
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		return paths
	}
	cases := []struct {
		name   string
		format archive.Format
		paths  []string
		lim    archive.Limits
	}{
		{"tar.gz", archive.FormatTarGz, write("one", [][]byte{archivetest.TarGz(files)}), archive.Limits{}},
		{"tar.zst split", archive.FormatTarZst, write("split", archivetest.Split(archivetest.TarZst(files), 3)), archive.Limits{}},
		{"stops early", archive.FormatTarGz, write("early", archivetest.Split(archivetest.TarGz(files), 2)), archive.Limits{MaxEntries: 1}},
		{"a zip named tar.gz", archive.FormatTarGz, write("zip", [][]byte{archivetest.Zip(files)}), archive.Limits{}},
		{"not compressed", archive.FormatTar, write("tar", [][]byte{archivetest.Tar(files)}), archive.Limits{}},
	}
	for _, c := range cases {
		got, l, listErr, err := HashList(ctx, c.format, c.paths, c.lim)
		if err != nil || listErr != nil {
			t.Fatalf("%s: %v, %v", c.name, err, listErr)
		}
		want, err := HashParts(c.paths)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Content, want.Content) || !slices.EqualFunc(got.Parts, want.Parts, bytes.Equal) || !slices.Equal(got.Sizes, want.Sizes) {
			t.Errorf("%s: hashes %x %x %v, want %x %x %v", c.name, got.Content, got.Parts, got.Sizes, want.Content, want.Parts, want.Sizes)
		}
		wantL, err := archive.List(ctx, c.format, c.paths, c.lim)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(l, wantL) {
			t.Errorf("%s: listing %+v, want %+v", c.name, l, wantL)
		}
		if c.lim.MaxEntries == 1 && (!l.Truncated || len(l.Entries) != 1) {
			t.Errorf("%s: listing did not stop early: %d entries, truncated %v", c.name, len(l.Entries), l.Truncated)
		}
	}
	if _, _, _, err := HashList(ctx, archive.FormatTarGz, []string{filepath.Join(dir, "missing")}, archive.Limits{}); err == nil {
		t.Error("a missing file hashed without error")
	}
}

// For every format, whole or split, and for compressed tars cut short or
// damaged, HashList's hashes are plain SHA-256 of the bytes (the content
// as one stream, each part alone) and its listing is List's: a broken
// stream is a listing error, never a wrong or missing hash.
func TestHashListEveryFormat(t *testing.T) {
	ctx := context.Background()
	rng := rand.NewChaCha8([32]byte{'h', 'a', 's', 'h'})
	var files []archivetest.File
	for i := range 3 {
		b := make([]byte, 3<<19) // together more than the listing's ring of buffers
		_, _ = rng.Read(b)
		files = append(files, archivetest.File{Name: fmt.Sprintf("dir/f%d.bin", i), Data: b})
	}
	small := files[:1:1]
	small = append(small, archivetest.File{Name: "small.txt", Data: []byte("small")})
	small[0].Data = small[0].Data[:64<<10] // the xz encoder makes a few MB/s of random data
	flip := func(b []byte, at int) []byte {
		b = bytes.Clone(b)
		b[at] ^= 0x55
		return b
	}
	zst, gz := archivetest.TarZst(files), archivetest.TarGz(files)
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		format archive.Format
		parts  [][]byte
		broken bool
	}{
		{"zip", archive.FormatZip, [][]byte{archivetest.Zip(files)}, false},
		{"7z", archive.Format7z, [][]byte{archivetest.SevenZip(files)}, false},
		{"rar", archive.FormatRar, [][]byte{archivetest.Rar(files)}, false},
		{"rar volumes", archive.FormatRar, archivetest.RarVolumes(files, 3), false},
		{"tar", archive.FormatTar, [][]byte{archivetest.Tar(files)}, false},
		{"tar.gz", archive.FormatTarGz, [][]byte{gz}, false},
		{"tar.xz", archive.FormatTarXz, [][]byte{archivetest.TarXz(small)}, false},
		{"tar.zst", archive.FormatTarZst, [][]byte{zst}, false},
		{"tar.zst split", archive.FormatTarZst, archivetest.Split(zst, 4), false},
		{"tar.lz4", archive.FormatTarLz4, [][]byte{archivetest.TarLz4(files)}, false},
		{"tar.zst cut short", archive.FormatTarZst, [][]byte{zst[:len(zst)*2/3]}, true},
		{"tar.zst split, last part missing", archive.FormatTarZst, archivetest.Split(zst, 3)[:2], true},
		{"tar.zst damaged", archive.FormatTarZst, [][]byte{flip(zst, len(zst)/3)}, true},
		{"tar.gz cut short", archive.FormatTarGz, [][]byte{gz[:len(gz)/3]}, true},
	} {
		var paths []string
		for i, b := range c.parts {
			p := filepath.Join(dir, fmt.Sprintf("%s.%03d", strings.ReplaceAll(c.name, " ", "_"), i+1))
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		got, l, listErr, err := HashList(ctx, c.format, paths, archive.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if content := sha256.Sum256(bytes.Join(c.parts, nil)); !bytes.Equal(got.Content, content[:]) {
			t.Errorf("%s: content hash %x, want %x", c.name, got.Content, content)
		}
		if len(got.Parts) != len(c.parts) {
			t.Fatalf("%s: %d part hashes for %d parts", c.name, len(got.Parts), len(c.parts))
		}
		for i, b := range c.parts {
			if s := sha256.Sum256(b); !bytes.Equal(got.Parts[i], s[:]) || got.Sizes[i] != int64(len(b)) {
				t.Errorf("%s: part %d hash %x size %d, want %x size %d", c.name, i, got.Parts[i], got.Sizes[i], s, len(b))
			}
		}
		if c.broken {
			if !errors.Is(listErr, archive.ErrMalformed) {
				t.Errorf("%s: listing error %v, want a malformed archive", c.name, listErr)
			}
			continue
		}
		if listErr != nil {
			t.Errorf("%s: %v", c.name, listErr)
			continue
		}
		wantL, err := archive.List(ctx, c.format, paths, archive.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(l, wantL) || len(l.Entries) == 0 {
			t.Errorf("%s: listing %+v, want %+v", c.name, l, wantL)
		}
	}
}

// partsHasher must split one stream into its parts as their sizes say,
// and refuse a stream longer or shorter than the parts.
func TestPartsHasherBounds(t *testing.T) {
	h := newPartsHasher([]int64{3, 0, 2})
	if _, err := h.Write([]byte("abcde")); err != nil {
		t.Fatal(err)
	}
	got, err := h.sum()
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []string{"abc", "", "de"} {
		if s := sha256.Sum256([]byte(p)); !bytes.Equal(got.Parts[i], s[:]) {
			t.Errorf("part %d hash %x, want that of %q", i, got.Parts[i], p)
		}
	}
	if _, err := newPartsHasher([]int64{2}).Write([]byte("abc")); err == nil {
		t.Error("a stream longer than the parts hashed without error")
	}
	short := newPartsHasher([]int64{4})
	short.Write([]byte("ab"))
	if _, err := short.sum(); err == nil {
		t.Error("a stream shorter than the parts summed without error")
	}
}
