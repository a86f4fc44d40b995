package archive

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"

	"stashd/archive/archivetest"
)

// fuzzLimits are the bounds every fuzz target lists with.
var fuzzLimits = Limits{MaxEntries: 1000, MaxHeaderBytes: 1 << 20, MaxPathBytes: 256}

// checkFuzzListing fails t when a listing breaks what List promises on any
// input: a *ListError, no recovered panic, limits kept, clean paths.
func checkFuzzListing(t *testing.T, l Listing, err error) {
	t.Helper()
	if err != nil {
		var le *ListError
		if !errors.As(err, &le) {
			t.Fatalf("error %v (%T) is not a *ListError", err, err)
		}
		if strings.Contains(err.Error(), "internal error") {
			t.Fatalf("walker panicked: %v", err)
		}
	}
	if len(l.Entries) > fuzzLimits.MaxEntries {
		t.Fatalf("%d entries over the limit", len(l.Entries))
	}
	for _, e := range l.Entries {
		if len(e.Path) > fuzzLimits.MaxPathBytes || !utf8.ValidString(e.Path) || strings.ContainsFunc(e.Path, unicode.IsControl) {
			t.Fatalf("unclean path %q", e.Path)
		}
	}
}

// fuzzOne lists data cut into 1 + parts%3 volumes as format.
func fuzzOne(t *testing.T, format Format, parts uint8, data []byte) {
	l, err := memList(context.Background(), format, fuzzLimits, archivetest.Split(data, int(parts)%3+1)...)
	checkFuzzListing(t, l, err)
}

// fuzzSeeds are the archives each format's target starts from, hostile ones
// included.
func fuzzSeedFiles() []archivetest.File {
	return append(sampleFiles()[:3], archivetest.TraversalFiles()[:4]...)
}

// FuzzZip: the zip walker, central directory, local header checks and the
// salvage scan, on one to three volumes.
func FuzzZip(f *testing.F) {
	files := fuzzSeedFiles()
	z := archivetest.Zip(files)
	f.Add(uint8(0), z)
	f.Add(uint8(1), z)
	f.Add(uint8(0), append(exeStub()[:64], z...))
	f.Add(uint8(0), archivetest.Corrupt(archivetest.ZipClaimMillion, files))
	f.Add(uint8(0), archivetest.Corrupt(archivetest.ZipTruncated, files))
	f.Add(uint8(0), archivetest.ZipSplit(files, 2)[1])
	f.Fuzz(func(t *testing.T, parts uint8, data []byte) { fuzzOne(t, FormatZip, parts, data) })
}

// FuzzRar: the RAR 4 and 5 block walkers, volumes chained by their headers.
func FuzzRar(f *testing.F) {
	files := fuzzSeedFiles()
	f.Add(uint8(0), archivetest.Rar(files))
	f.Add(uint8(1), bytes.Join(archivetest.RarVolumes(files, 2), nil))
	f.Add(uint8(0), rar4Volumes(files, 1)[0])
	f.Add(uint8(2), bytes.Join(rar4Volumes(files, 3), nil))
	f.Add(uint8(0), archivetest.RarEncryptedHeaders(1))
	f.Fuzz(func(t *testing.T, parts uint8, data []byte) { fuzzOne(t, FormatRar, parts, data) })
}

// Fuzz7z: the 7z header walker, packed headers included.
func Fuzz7z(f *testing.F) {
	files := fuzzSeedFiles()
	sz := archivetest.SevenZip(files)
	f.Add(uint8(0), sz)
	f.Add(uint8(2), sz)
	f.Add(uint8(0), append(exeStub()[:64], sz...))
	f.Add(uint8(0), archivetest.Corrupt(archivetest.SevenZipHugeHeader, files))
	for _, name := range []string{"data-encrypted.7z", "hdr-encrypted.7z"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(uint8(0), b)
		}
	}
	f.Fuzz(func(t *testing.T, parts uint8, data []byte) { fuzzOne(t, Format7z, parts, data) })
}

// tarCompressors are the streams FuzzTar wraps a tar in, by its selector.
var tarCompressors = [...]Format{FormatTar, FormatTarGz, FormatTarBz2, FormatTarXz, FormatTarZst, FormatTarLz4}

// FuzzTar: tar with each compressor. An even selector compresses the
// fuzzed bytes as a tar (the tar reader behind a valid stream); an odd one
// hands them over as the compressed stream itself (the decompressor).
func FuzzTar(f *testing.F) {
	files := fuzzSeedFiles()
	tarball := archivetest.Tar(files)
	for i := range tarCompressors {
		f.Add(uint8(2*i), tarball)
	}
	f.Add(uint8(1*2+1), archivetest.TarGz(files))
	f.Add(uint8(3*2+1), archivetest.TarXz(files))
	f.Add(uint8(4*2+1), archivetest.TarZst(files))
	f.Add(uint8(5*2+1), archivetest.TarLz4(files))
	if b, err := os.ReadFile(filepath.Join("testdata", "sample.tar.bz2")); err == nil {
		f.Add(uint8(2*2+1), b)
	}
	f.Add(uint8(0), archivetest.EscapingSymlinkTar(files))
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		format := tarCompressors[int(sel/2)%len(tarCompressors)]
		if sel%2 == 0 {
			data = compressFor(t, format, data)
		}
		l, err := memList(context.Background(), format, fuzzLimits, data)
		checkFuzzListing(t, l, err)
	})
}

// compressFor compresses data with format's compressor (bzip2, which Go
// cannot write, is left as it is: the tar reader then sees raw bytes).
func compressFor(t *testing.T, format Format, data []byte) []byte {
	var buf bytes.Buffer
	var err error
	switch format {
	case FormatTarGz:
		zw := gzip.NewWriter(&buf)
		zw.Write(data)
		err = zw.Close()
	case FormatTarXz:
		zw, _ := xz.WriterConfig{DictCap: 1 << 16}.NewWriter(&buf) // the default 8 MiB window costs more than the listing
		zw.Write(data)
		err = zw.Close()
	case FormatTarZst:
		zw, _ := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		zw.Write(data)
		err = zw.Close()
	case FormatTarLz4:
		zw := lz4.NewWriter(&buf)
		zw.Write(data)
		err = zw.Close()
	default:
		return data
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// setSchemes name the volumes FuzzAssemble makes, by its selector.
var setSchemes = [...]func(i int) string{
	func(i int) string { return fmt.Sprintf("x.part%d.rar", i+1) },
	func(i int) string {
		if i == 0 {
			return "x.rar"
		}
		return fmt.Sprintf("x.r%02d", i-1)
	},
	func(i int) string { return fmt.Sprintf("x.7z.%03d", i+1) },
	func(i int) string { return fmt.Sprintf("x.zip.%03d", i+1) },
	func(i int) string { return fmt.Sprintf("x.tar.gz.%03d", i+1) },
}

// FuzzAssemble: set assembly from volumes in random orders, with
// duplicates (same or other bytes) and truncated copies. ops drive it: the
// first byte picks the naming scheme, the second the number of volumes;
// each later pair adds a copy of volume a cut to b/255 of its bytes (255:
// whole), and a final odd byte reverses the posting order. Assembly must
// not panic, must use each candidate at most once, must account for every
// candidate it did not use, and may only call verified what lists cleanly.
func FuzzAssemble(f *testing.F) {
	files := fuzzSeedFiles()
	f.Add([]byte{0, 3, 1, 128}, bytes.Join(archivetest.RarVolumes(files, 3), nil))
	f.Add([]byte{1, 3, 2, 10, 1}, bytes.Join(rar4Volumes(files, 3), nil))
	f.Add([]byte{2, 2, 0, 255}, archivetest.SevenZip(files))
	f.Add([]byte{3, 3, 2, 100}, archivetest.Zip(files))
	f.Add([]byte{4, 4}, archivetest.TarGz(files))
	f.Fuzz(func(t *testing.T, ops, data []byte) {
		if len(ops) < 2 || len(ops) > 64 || len(data) > 1<<16 {
			return
		}
		scheme := setSchemes[int(ops[0])%len(setSchemes)]
		vols := archivetest.Split(data, int(ops[1])%6+1)
		var posted [][]byte
		var names []string
		for i, v := range vols {
			posted, names = append(posted, v), append(names, scheme(i))
		}
		rest := ops[2:]
		for len(rest) >= 2 {
			i := int(rest[0]) % len(vols)
			cut := len(vols[i]) * int(rest[1]) / 255
			posted, names = append(posted, vols[i][:cut]), append(names, scheme(i))
			rest = rest[2:]
		}
		if len(rest) == 1 && rest[0]%2 == 1 {
			slices.Reverse(posted)
			slices.Reverse(names)
		}
		cands := make([]Candidate, len(posted))
		for i, p := range posted {
			sum := sha256.Sum256(p)
			cands[i] = Candidate{Name: names[i], Hash: hex.EncodeToString(sum[:]), Size: int64(len(p))}
		}
		a := assemble(cands, func(format Format, order []int) (Listing, error) {
			vols := make([][]byte, len(order))
			for i, idx := range order {
				vols[i] = posted[idx]
			}
			return memList(context.Background(), format, fuzzLimits, vols...)
		})
		checkFuzzListing(t, a.Listing, a.Err)
		used := map[int]int{}
		for _, i := range a.Order {
			used[i]++
		}
		for _, r := range a.Rejected {
			used[r.Index]++
		}
		for i, n := range used {
			if n != 1 || i < 0 || i >= len(cands) {
				t.Fatalf("candidate %d used %d times (order %v, rejected %+v)", i, n, a.Order, a.Rejected)
			}
		}
		if a.Order != nil && len(used) != len(cands) {
			t.Fatalf("%d candidates, %d accounted for", len(cands), len(used))
		}
		if a.Verified && (a.Err != nil || !a.Complete) {
			t.Fatalf("verified with error %v, complete %v", a.Err, a.Complete)
		}
		if !a.Complete && a.Reason == "" {
			t.Fatal("incomplete without a reason")
		}
		if len(a.Missing) > maxReportedMissing+1 {
			t.Fatalf("%d missing names", len(a.Missing))
		}
	})
}
