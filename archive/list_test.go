package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ulikunitz/xz"

	"stashd/archive/archivetest"
)

// builders makes a single archive of each format from files.
func builders(t *testing.T) map[Format]func([]archivetest.File) []byte {
	t.Helper()
	return map[Format]func([]archivetest.File) []byte{
		FormatZip:    archivetest.Zip,
		FormatTar:    archivetest.Tar,
		FormatTarGz:  archivetest.TarGz,
		FormatTarXz:  archivetest.TarXz,
		FormatTarZst: archivetest.TarZst,
		FormatTarLz4: archivetest.TarLz4,
		Format7z:     archivetest.SevenZip,
		FormatRar:    archivetest.Rar,
	}
}

func TestListSingle(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	for format, build := range builders(t) {
		t.Run(string(format), func(t *testing.T) {
			t.Parallel()
			l, err := List(context.Background(), format, writeVolumes(t, build(files)), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if l.Truncated || l.Encrypted {
				t.Errorf("Truncated %v Encrypted %v", l.Truncated, l.Encrypted)
			}
			checkEntries(t, l.Entries, wantEntries(files))
		})
	}
}

func TestListTarBz2Fixture(t *testing.T) {
	t.Parallel()
	l, err := List(context.Background(), FormatTarBz2, []string{filepath.Join("testdata", "sample.tar.bz2")}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, l.Entries, wantEntries(sampleFiles()))
}

func TestListEmptyArchives(t *testing.T) {
	t.Parallel()
	for format, build := range builders(t) {
		l, err := memList(context.Background(), format, Limits{}, build(nil))
		if err != nil || len(l.Entries) != 0 {
			t.Errorf("%s: empty archive listed %+v, %v", format, l.Entries, err)
		}
	}
}

func TestListMultipart(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	tests := []struct {
		name   string
		format Format
		vols   [][]byte
	}{
		{"7z numbered", Format7z, archivetest.Split(archivetest.SevenZip(files), 3)},
		{"7z numbered in 50 parts", Format7z, archivetest.Split(archivetest.SevenZip(files), 50)},
		{"zip numbered", FormatZip, archivetest.Split(archivetest.Zip(files), 4)},
		{"zip split z01 z02 zip", FormatZip, archivetest.ZipSplit(files, 3)},
		{"zip split z01 zip", FormatZip, archivetest.ZipSplit(files, 2)},
		{"zip split of many", FormatZip, archivetest.ZipSplit(files, 6)},
		{"rar volumes", FormatRar, archivetest.RarVolumes(files, 3)},
		{"rar more volumes than data", FormatRar, archivetest.RarVolumes(files[:3], 5)},
		{"tar.gz numbered", FormatTarGz, archivetest.Split(archivetest.TarGz(files), 3)},
		{"tar numbered", FormatTar, archivetest.Split(archivetest.Tar(files), 5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := files
			if tt.name == "rar more volumes than data" {
				want = files[:3]
			}
			l, err := List(context.Background(), tt.format, writeVolumes(t, tt.vols...), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			checkEntries(t, l.Entries, wantEntries(want))
		})
	}
}

// Parts named as one set that hold two archives are refused, whatever
// the format: a listing that stopped at the first archive's end, or took
// a whole first part for a self-extractor's stub, would catalogue one
// archive's files under both, and its content signature would make the
// set a repack of the archive it lists. A set whose last part holds only
// the archive's tail (a tar's zero padding, a 7z's last header bytes) is
// one archive.
func TestListRefusesPartsHoldingNoneOfTheArchive(t *testing.T) {
	t.Parallel()
	one := []archivetest.File{{Name: "first/one.bin", Data: bytes.Repeat([]byte("1"), 3000)}}
	two := []archivetest.File{{Name: "second/two.bin", Data: bytes.Repeat([]byte("2"), 4000)}}
	split := archivetest.ZipSplit([]archivetest.File{{Name: "split/member.bin", Data: bytes.Repeat([]byte("s"), 4000)}}, 2)
	for _, tc := range []struct {
		name   string
		format Format
		parts  [][]byte
	}{
		{"zip split volume and a whole zip", FormatZip, [][]byte{split[0], archivetest.Zip(two)}},
		{"zip and zip", FormatZip, [][]byte{archivetest.Zip(one), archivetest.Zip(two)}},
		{"7z and 7z", Format7z, [][]byte{archivetest.SevenZip(one), archivetest.SevenZip(two)}},
		{"tar and tar", FormatTar, [][]byte{archivetest.Tar(one), archivetest.Tar(two)}},
		{"tar.gz and tar.gz", FormatTarGz, [][]byte{archivetest.TarGz(one), archivetest.TarGz(two)}},
		{"tar and a tar.gz", FormatTar, [][]byte{archivetest.Tar(one), archivetest.TarGz(two)}},
		{"rar and rar", FormatRar, [][]byte{archivetest.Rar(one), archivetest.Rar(two)}},
	} {
		l, err := List(context.Background(), tc.format, writeVolumes(t, tc.parts...), Limits{})
		if !errors.Is(err, ErrNotOneArchive) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: listed %d entries, err %v; want the parts refused as holding none of the archive", tc.name, len(l.Entries), err)
		}
	}
	tarData := archivetest.Tar(one)
	end := bytes.LastIndexFunc(tarData, func(r rune) bool { return r != 0 }) + 1 // the padding after the end blocks' start
	sz := archivetest.SevenZip(one)
	// pixz writes its index after the tar's end, in the same xz stream:
	// bytes that are neither zeros nor another tar.
	indexed := xzOf(t, append(archivetest.Tar(one), bytes.Repeat([]byte("first/one.bin\x00\x01\x02"), 40)...))
	gzIndexed := gzipOf(t, append(archivetest.Tar(one), bytes.Repeat([]byte("index"), 200)...))
	// A self-extractor's stub larger than the first part.
	sfx := append(bytes.Repeat([]byte{0x90}, 40000), archivetest.Zip(one)...)
	for _, tc := range []struct {
		name   string
		format Format
		parts  [][]byte
	}{
		{"tar whose last part is zero padding", FormatTar, [][]byte{tarData[:end+512], tarData[end+512:]}},
		{"7z whose last part is its header's last byte", Format7z, [][]byte{sz[:len(sz)-1], sz[len(sz)-1:]}},
		{"zip whose last part is its end record's last byte", FormatZip, func() [][]byte { z := archivetest.Zip(one); return [][]byte{z[:len(z)-1], z[len(z)-1:]} }()},
		{"tar.xz with an index after the tar, split near its end", FormatTarXz, [][]byte{indexed[:len(indexed)-1], indexed[len(indexed)-1:]}},
		{"tar.xz with an index after the tar, split in two", FormatTarXz, archivetest.Split(indexed, 2)},
		{"tar.gz with data after the tar, split in two", FormatTarGz, archivetest.Split(gzIndexed, 2)},
		{"self-extracting zip split inside its stub", FormatZip, [][]byte{sfx[:30000], sfx[30000:]}},
	} {
		l, err := List(context.Background(), tc.format, writeVolumes(t, tc.parts...), Limits{})
		if err != nil || len(l.Entries) != 1 {
			t.Errorf("%s: listed %d entries, err %v; want the one archive", tc.name, len(l.Entries), err)
		}
	}
}

// A tar.xz made by pixz (an index after the tar, in the same stream)
// lists whole however it is cut in two. Skipped without the pixz command.
func TestListPixzSplit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("pixz"); err != nil {
		t.Skip("pixz command not installed (apt-get install pixz)")
	}
	var files []archivetest.File
	for i := range 20 {
		files = append(files, archivetest.File{Name: fmt.Sprintf("d/f%02d.bin", i), Data: bytes.Repeat([]byte{byte(i)}, 300*i+1)})
	}
	cmd := exec.Command("pixz")
	cmd.Stdin = bytes.NewReader(archivetest.Tar(files))
	data, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{1, len(data) / 2, len(data) - 1} {
		l, err := List(context.Background(), FormatTarXz, writeVolumes(t, data[:cut], data[cut:]), Limits{})
		if err != nil || len(l.Entries) != len(files) {
			t.Errorf("pixz tar.xz cut at %d of %d: %d entries, err %v; want %d", cut, len(data), len(l.Entries), err, len(files))
		}
	}
}

func xzOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestListMissingParts(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	rar := archivetest.RarVolumes(files, 3)
	zsplit := archivetest.ZipSplit(files, 3)
	sz := archivetest.Split(archivetest.SevenZip(files), 3)
	tests := []struct {
		name       string
		format     Format
		vols       [][]byte
		substr     string
		minEntries int // entries listed before the gap
	}{
		{"rar last volume missing", FormatRar, rar[:2], "archive continues after volume 2: next volume missing", 3},
		{"rar first volume missing", FormatRar, rar[1:], "part 1 is volume 2 of its archive", 0},
		{"rar volumes swapped", FormatRar, [][]byte{rar[0], rar[2], rar[1]}, "part 2 is volume 3", 3},
		{"rar volume given twice", FormatRar, [][]byte{rar[0], rar[1], rar[1], rar[2]}, "part 3 is volume 2", 3},
		{"rar single volume after last", FormatRar, [][]byte{archivetest.Rar(files), rar[0]}, "volume 1 is the last of its archive, but 2 parts were given", 5},
		{"zip split final alone", FormatZip, zsplit[2:], "last part of a split set (disk 3); the earlier parts are missing", 0},
		{"zip split middle missing", FormatZip, [][]byte{zsplit[0], zsplit[2]}, "split set of 3 disks but 2 parts given", 0},
		{"7z last volume missing", Format7z, sz[:2], "header beyond end of file", 0},
		{"7z first volume missing", Format7z, sz[1:], "7z signature not found", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, err := List(context.Background(), tt.format, writeVolumes(t, tt.vols...), Limits{})
			wantListError(t, err, tt.format, tt.substr, ErrMalformed)
			// A missing first volume leaves bytes that are not the start of
			// an archive: malformed, nothing says a volume is missing.
			if missing := !strings.Contains(tt.name, "first") && (strings.Contains(tt.name, "missing") || strings.Contains(tt.name, "alone")); missing != errors.Is(err, ErrVolumeMissing) {
				t.Errorf("%v: ErrVolumeMissing %v, want %v", err, !missing, missing)
			}
			if len(l.Entries) < tt.minEntries {
				t.Errorf("listed %d entries before the error, want at least %d", len(l.Entries), tt.minEntries)
			}
		})
	}
}

func TestListTruncated(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	for format, build := range builders(t) {
		data := build(files)
		cuts := []int{0, 1, 5, len(data) / 4, len(data) / 2}
		if !strings.HasPrefix(string(format), "tar") {
			// A compressed tar may end before its trailer is read; the others
			// need their last bytes.
			cuts = append(cuts, len(data)-1)
		}
		for _, cut := range cuts {
			l, err := memList(context.Background(), format, Limits{}, data[:cut])
			if err == nil {
				t.Errorf("%s cut at %d of %d: no error, %d entries", format, cut, len(data), len(l.Entries))
				continue
			}
			wantListError(t, err, format, "", ErrMalformed)
		}
	}
}

func TestListTruncatedKeepsEntries(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	tests := []struct {
		name   string
		format Format
		data   []byte
		substr string
		min    int
	}{
		{"zip without end records", FormatZip, archivetest.Corrupt(archivetest.ZipTruncated, files), "end of central directory record not found (listed", 3},
		{"rar cut in data", FormatRar, archivetest.Corrupt(archivetest.RarTruncated, files), "truncated data", 5},
		{"tar cut in data", FormatTar, archivetest.Tar(files)[:40000], "truncated archive after 4 entries", 4},
		{"tar.gz cut", FormatTarGz, archivetest.TarGz(files)[:len(archivetest.TarGz(files))-200], "after", 3},
	}
	for _, tt := range tests {
		l, err := memList(context.Background(), tt.format, Limits{}, tt.data)
		wantListError(t, err, tt.format, tt.substr, ErrMalformed)
		if len(l.Entries) < tt.min {
			t.Errorf("%s: %d entries, want at least %d", tt.name, len(l.Entries), tt.min)
		}
		for i, e := range l.Entries {
			// A salvaged zip entry whose data descriptor is lost has no size.
			if w := wantEntries(files)[i]; e.Path != w.Path || e.Dir != w.Dir || (e.Size != w.Size && e.Size != -1) {
				t.Errorf("%s: entry %d is %+v, want %+v", tt.name, i, e, w)
			}
		}
	}
}

func TestListGarbage(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for format := range builders(t) {
		for _, size := range []int{0, 1, 7, 32, 100, 5000, 70000} {
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			l, err := memList(context.Background(), format, Limits{}, data)
			if err == nil {
				t.Errorf("%s: %d random bytes listed without error: %+v", format, size, l)
				continue
			}
			wantListError(t, err, format, "", ErrMalformed)
		}
	}
}

func TestListCorruptions(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	tests := []struct {
		kind    archivetest.Corruption
		format  Format
		substr  string
		cause   error
		entries int
	}{
		{archivetest.ZipBadDirectory, FormatZip, "central directory not found at offset", ErrMalformed, 0},
		{archivetest.ZipClaimMillion, FormatZip, "central directory holds 5 entries, end record claims 1000000", ErrMalformed, 5},
		{archivetest.ZipDirectoryOverrun, FormatZip, "truncated central directory (5 of 5 entries)", ErrMalformed, 5},
		{archivetest.SevenZipHugeHeader, Format7z, "header larger than limit (1073741824 > 67108864 bytes)", ErrLimit, 0},
		{archivetest.SevenZipBadHeaderCRC, Format7z, "header checksum mismatch", ErrMalformed, 0},
		{archivetest.RarBadHeaderCRC, FormatRar, "header checksum mismatch at offset 16 of volume 1", ErrMalformed, 0},
	}
	for _, tt := range tests {
		l, err := List(context.Background(), tt.format, writeVolumes(t, archivetest.Corrupt(tt.kind, files)), Limits{})
		wantListError(t, err, tt.format, tt.substr, tt.cause)
		if len(l.Entries) != tt.entries {
			t.Errorf("%s: %d entries, want %d", tt.kind, len(l.Entries), tt.entries)
		}
	}
}

func TestList7zHeaderLimit(t *testing.T) {
	t.Parallel()
	files := make([]archivetest.File, 200)
	for i := range files {
		files[i] = archivetest.File{Name: fmt.Sprintf("dir/file-%03d.txt", i), Data: []byte{byte(i)}}
	}
	z := archivetest.SevenZip(files)
	l, err := memList(context.Background(), Format7z, Limits{MaxHeaderBytes: 1000}, z)
	wantListError(t, err, Format7z, "header larger than limit (", ErrLimit)
	if len(l.Entries) != 0 {
		t.Errorf("listed %d entries over the limit", len(l.Entries))
	}
	if l, err := memList(context.Background(), Format7z, Limits{MaxHeaderBytes: 1 << 20}, z); err != nil || len(l.Entries) != 200 {
		t.Errorf("under the limit: %d entries, %v", len(l.Entries), err)
	}
}

func TestListUnsafeNames(t *testing.T) {
	t.Parallel()
	files := archivetest.TraversalFiles()
	want := []Entry{
		{Path: "../../etc/passwd", Size: 4, Unsafe: true},
		{Path: "/abs/path", Size: 3, Unsafe: true},
		{Path: `C:\windows\x`, Size: 5, Unsafe: true},
		{Path: `ok\..\..\x`, Size: 9, Unsafe: true},
		{Path: "ab", Size: 3, Unsafe: true},
		{Path: "ctl[31m.txt", Size: 6, Unsafe: true},
		{Path: "bad\ufffd\ufffd.txt", Size: 4, Unsafe: true},
		{Path: "safe/name.txt", Size: 4},
	}
	for _, format := range []Format{FormatZip, FormatRar} {
		l, err := memList(context.Background(), format, Limits{}, builders(t)[format](files))
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		checkEntries(t, l.Entries, want)
	}
	// 7z stores UTF-16 names: no NUL, no invalid UTF-8.
	l, err := memList(context.Background(), Format7z, Limits{}, archivetest.SevenZip(append(files[:4:4], files[5], files[7])))
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, l.Entries, append(want[:4:4], want[5], want[7]))

	// tar ends a name at NUL, so leave that one out, and add links out of the root.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if strings.Contains(f.Name, "\x00") {
			continue
		}
		tw.WriteHeader(&tar.Header{Name: f.Name, Size: int64(len(f.Data)), Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX})
		tw.Write(f.Data)
	}
	tw.WriteHeader(&tar.Header{Name: "link", Linkname: "../../../etc", Typeflag: tar.TypeSymlink, Format: tar.FormatPAX})
	tw.WriteHeader(&tar.Header{Name: "inside", Linkname: "docs/readme", Typeflag: tar.TypeSymlink, Format: tar.FormatPAX})
	tw.Close()
	l, err = memList(context.Background(), FormatTar, Limits{}, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tarWant := append(append([]Entry{}, want[:4]...), want[5:]...)
	tarWant = append(tarWant, Entry{Path: "link", Unsafe: true}, Entry{Path: "inside"})
	checkEntries(t, l.Entries, tarWant)
}

func TestListLongNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 5000) // 10,000 bytes
	files := []archivetest.File{{Name: long, Data: []byte("x")}}
	for _, format := range []Format{FormatZip, Format7z, FormatRar, FormatTar} {
		l, err := memList(context.Background(), format, Limits{MaxPathBytes: 101}, builders(t)[format](files))
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		p := l.Entries[0].Path
		if len(p) != 100 || !utf8.ValidString(p) || l.Entries[0].Unsafe {
			t.Errorf("%s: cut name is %d bytes, valid %v, unsafe %v", format, len(p), utf8.ValidString(p), l.Entries[0].Unsafe)
		}
	}
}

// manyFiles returns n tiny files.
func manyFiles(n int) []archivetest.File {
	files := make([]archivetest.File, n)
	for i := range files {
		files[i] = archivetest.File{Name: fmt.Sprintf("f/%05d", i), Data: []byte{byte(i)}}
	}
	return files
}

func TestListMaxEntries(t *testing.T) {
	t.Parallel()
	const n, limit = 5000, 1000
	var zipMany bytes.Buffer
	if err := archivetest.ZipMany(&zipMany, n, func(b []byte, i int) []byte { return fmt.Appendf(b, "f/%05d", i) }); err != nil {
		t.Fatal(err)
	}
	files := manyFiles(n)
	vols := map[Format][]byte{
		FormatZip:   zipMany.Bytes(),
		FormatTar:   archivetest.Tar(files),
		FormatTarGz: archivetest.TarGz(files),
		Format7z:    archivetest.SevenZip(files),
		FormatRar:   archivetest.Rar(files),
	}
	for format, data := range vols {
		l, err := memList(context.Background(), format, Limits{MaxEntries: limit}, data)
		if err != nil {
			t.Errorf("%s: %v", format, err)
		}
		if !l.Truncated || len(l.Entries) != limit {
			t.Errorf("%s: Truncated %v with %d entries, want true with %d", format, l.Truncated, len(l.Entries), limit)
			continue
		}
		if l.Entries[limit-1].Path != fmt.Sprintf("f/%05d", limit-1) {
			t.Errorf("%s: last entry %q", format, l.Entries[limit-1].Path)
		}
		// Exactly as many entries as the limit is not truncated.
		if l, err := memList(context.Background(), format, Limits{MaxEntries: n}, data); err != nil || l.Truncated || len(l.Entries) != n {
			t.Errorf("%s at the limit: Truncated %v, %d entries, %v", format, l.Truncated, len(l.Entries), err)
		}
	}
}

func TestListHeaderBytesLimit(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := archivetest.ZipMany(&buf, 5000, func(b []byte, i int) []byte { return fmt.Appendf(b, "f/%05d", i) }); err != nil {
		t.Fatal(err)
	}
	// Each directory entry is 46+7 bytes: 10,000 bytes hold 188 whole ones.
	l, err := memList(context.Background(), FormatZip, Limits{MaxHeaderBytes: 10_000}, buf.Bytes())
	if err != nil || !l.Truncated || len(l.Entries) != 188 {
		t.Errorf("zip: Truncated %v, %d entries, %v", l.Truncated, len(l.Entries), err)
	}
	l, err = memList(context.Background(), FormatRar, Limits{MaxHeaderBytes: 10_000}, archivetest.Rar(manyFiles(5000)))
	if err != nil || !l.Truncated || len(l.Entries) == 0 || len(l.Entries) > 400 {
		t.Errorf("rar: Truncated %v, %d entries, %v", l.Truncated, len(l.Entries), err)
	}
}

func TestListZipEncrypted(t *testing.T) {
	t.Parallel()
	z := archivetest.Zip(sampleFiles())
	cd := bytes.Index(z, []byte("PK\x01\x02"))
	z[cd+8] |= 1 // general purpose flag: encrypted
	l, err := memList(context.Background(), FormatZip, Limits{}, z)
	if err != nil || !l.Encrypted || len(l.Entries) != 5 {
		t.Errorf("Encrypted %v, %d entries, %v", l.Encrypted, len(l.Entries), err)
	}
}

func TestListCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for format, build := range builders(t) {
		l, err := memList(ctx, format, Limits{}, build(sampleFiles()))
		wantListError(t, err, format, "listing interrupted", context.Canceled)
		if len(l.Entries) != 0 {
			t.Errorf("%s: %d entries after cancel", format, len(l.Entries))
		}
	}
}

func TestListCanceledMidWalk(t *testing.T) {
	t.Parallel()
	const n = 5000
	files := manyFiles(n)
	var zipMany bytes.Buffer
	if err := archivetest.ZipMany(&zipMany, n, func(b []byte, i int) []byte { return fmt.Appendf(b, "f/%05d", i) }); err != nil {
		t.Fatal(err)
	}
	vols := map[Format][]byte{
		FormatZip:   zipMany.Bytes(),
		FormatTarGz: archivetest.TarGz(files),
		Format7z:    archivetest.SevenZip(files),
		FormatRar:   archivetest.Rar(files),
	}
	for format, data := range vols {
		// A few context checks pass, then the context reports Canceled.
		l, err := memList(newCancelAfter(5), format, Limits{}, data)
		wantListError(t, err, format, "listing interrupted", context.Canceled)
		if len(l.Entries) == 0 || len(l.Entries) >= n {
			t.Errorf("%s: %d entries listed before the cancel, want some but not all", format, len(l.Entries))
		}
	}
}

func TestListBadInput(t *testing.T) {
	t.Parallel()
	_, err := List(context.Background(), FormatZip, nil, Limits{})
	wantListError(t, err, FormatZip, "no parts given", ErrUnsupported)
	_, err = List(context.Background(), "doc", writeVolumes(t, []byte("x")), Limits{})
	wantListError(t, err, "doc", "not an archive format", ErrUnsupported)
	_, err = List(context.Background(), FormatZip, []string{filepath.Join(t.TempDir(), "missing")}, Limits{})
	wantListError(t, err, FormatZip, "open part 1", os.ErrNotExist)
}

// TestListMillionEntryZip builds a real zip of 1,000,000 entries, streamed
// to a temporary file, and checks that List stops at MaxEntries with a
// bounded amount of memory.
func TestListMillionEntryZip(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 90 MB file")
	}
	const n = 1_000_000
	path := filepath.Join(t.TempDir(), "million.zip")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// strconv, not fmt: two million names must stay cheap under -race.
	name := func(b []byte, i int) []byte { return strconv.AppendInt(append(b, "d/"...), int64(10_000_000+i), 10) }
	if err := archivetest.ZipMany(f, n, name); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// The default entry limit; the time bound an hour, not the default
	// 10 s, which a loaded machine under -race spent at 76,287 entries.
	l, err := List(context.Background(), FormatZip, []string{path}, Limits{MaxDuration: time.Hour})
	if err != nil || !l.Truncated || len(l.Entries) != DefaultMaxEntries {
		t.Fatalf("default entry limit: Truncated %v, %d entries, %v", l.Truncated, len(l.Entries), err)
	}

	// With a small MaxEntries the allocations stay small though the
	// directory is 55 MB: it is streamed, never held.
	allocated := testing.AllocsPerRun(1, func() {
		l, err = List(context.Background(), FormatZip, []string{path}, Limits{MaxEntries: 1000})
	})
	if err != nil || !l.Truncated || len(l.Entries) != 1000 {
		t.Fatalf("MaxEntries 1000: Truncated %v, %d entries, %v", l.Truncated, len(l.Entries), err)
	}
	if allocated > 5000 {
		t.Errorf("%v allocations to list 1000 entries", allocated)
	}
	bytesPerList := bytesAllocated(func() {
		List(context.Background(), FormatZip, []string{path}, Limits{MaxEntries: 1000})
	})
	if bytesPerList > 4<<20 {
		t.Errorf("listing 1000 of 1,000,000 entries allocated %d bytes", bytesPerList)
	}
}

func TestListDecoderWindowLimits(t *testing.T) {
	t.Parallel()
	// An xz stream whose block header asks for a 4 GiB dictionary (header CRC kept valid).
	x := archivetest.TarXz(sampleFiles())
	hlen := (int(x[12]) + 1) * 4
	blk := x[12 : 12+hlen]
	i := bytes.Index(blk, []byte{0x21, 0x01}) // filter LZMA2, one property byte
	if i < 0 {
		t.Fatal("no LZMA2 filter in the block header")
	}
	blk[i+2] = 40
	binary.LittleEndian.PutUint32(blk[hlen-4:], crc32.ChecksumIEEE(blk[:hlen-4]))
	l, err := memList(context.Background(), FormatTarXz, Limits{}, x)
	wantListError(t, err, FormatTarXz, "xz dictionary of 4095 MiB over the 128 MiB listing limit", ErrLimit)
	if len(l.Entries) != 0 {
		t.Errorf("%d entries", len(l.Entries))
	}

	// A zstd frame declaring a 1 GiB window, then an empty last raw block.
	z := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xa0, 0x01, 0x00, 0x00}
	_, err = memList(context.Background(), FormatTarZst, Limits{}, z)
	wantListError(t, err, FormatTarZst, "window size exceeded", ErrMalformed)
}

// A 153 KB tar.xz holding 1 GiB of zeros (made with tar and xz -6)
// decompresses for seconds: the time bound ends its listing with a recorded
// limit error, and the entry seen before the bound is kept. The clock
// moves a millisecond per look, so a loaded machine cannot spend the bound
// before the first header (a 20 ms bound on the wall clock did once).
func TestListTimeBound(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", "bomb-zeros.tar.xz")
	l := listTicking(t, path, FormatTarXz, 20*time.Millisecond)
	if len(l.Entries) != 1 || l.Entries[0].Path != "zeros.bin" || l.Entries[0].Size != 1<<30 {
		t.Errorf("entries %+v, want zeros.bin of 1 GiB", l.Entries)
	}
	// A cancelled context is still reported as an interruption.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := List(ctx, FormatTarXz, []string{path}, Limits{MaxDuration: time.Hour})
	wantListError(t, err, FormatTarXz, "listing interrupted", context.Canceled)
	// Every format stops at the bound, however small the archive.
	for format, build := range builders(t) {
		_, err := memList(context.Background(), format, Limits{MaxDuration: time.Nanosecond}, build(sampleFiles()))
		wantListError(t, err, format, "time bound", ErrLimit)
	}
}

// TestListTimeBoundDecompressed: 481 bytes of bzip2 inflate to 512 MiB, all
// read through in one read of the compressed input. The bound must be
// checked while the decompressed stream is read, not only when compressed
// input is: on a clock that advances a millisecond per look, a 50 ms bound
// stops the walk long before the end.
func TestListTimeBoundDecompressed(t *testing.T) {
	t.Parallel()
	l := listTicking(t, filepath.Join("testdata", "bomb-zeros.tar.bz2"), FormatTarBz2, 50*time.Millisecond)
	if len(l.Entries) != 1 || l.Entries[0].Size != 1<<29 {
		t.Errorf("entries %+v, want zeros.bin of 512 MiB", l.Entries)
	}
}

// listTicking lists the archive at path under a time bound, on a clock
// that moves a millisecond each time it is read: the listing must end with
// the bound's error, and the clock be read at most 200 times (the walk
// stopped at the bound, not at the archive's end).
func listTicking(t *testing.T, path string, format Format, bound time.Duration) Listing {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var looks atomic.Int64
	start := time.Now()
	clock := func() time.Time { return start.Add(time.Duration(looks.Add(1)) * time.Millisecond) }
	p := newPartSet()
	p.add(bytes.NewReader(data), int64(len(data)))
	l, err := listClock(context.Background(), format, p, Limits{MaxDuration: bound}, clock)
	wantListError(t, err, format, "time bound", ErrLimit)
	if n := looks.Load(); n > 200 {
		t.Errorf("the clock was read %d times: the walk went on past the bound", n)
	}
	return l
}

// A compressed tar is checked to the end of its stream: a damaged gzip
// trailer (CRC-32 after the tar's end blocks) fails the listing, entries kept.
func TestListTarChecksStreamEnd(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	gz := archivetest.TarGz(files)
	gz[len(gz)-8] ^= 0xff // the trailer's CRC-32
	l, err := memList(context.Background(), FormatTarGz, Limits{}, gz)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("damaged gzip trailer: error %v", err)
	}
	checkEntries(t, l.Entries, wantEntries(files))
}
