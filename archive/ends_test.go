package archive

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"stashd/archive/archivetest"
)

// sz7StartHeader returns z with its start header's next header offset,
// size and CRC replaced (its own CRC made to hold).
func sz7StartHeader(z []byte, off, size uint64, crc uint32) []byte {
	z = bytes.Clone(z)
	binary.LittleEndian.PutUint64(z[12:], off)
	binary.LittleEndian.PutUint64(z[20:], size)
	binary.LittleEndian.PutUint32(z[28:], crc)
	binary.LittleEndian.PutUint32(z[8:], crc32.ChecksumIEEE(z[12:32]))
	return z
}

// A start header whose next header size is zero names an empty archive
// only with a zero offset and CRC, as 7-Zip writes one; 7-Zip refuses
// any other ("Is not archive"). A 7z with files whose size field alone
// was zeroed is malformed, not an empty archive verified. Bytes after an
// archive's end (its header; the start header for an empty one) are
// listed past, and flagged: there 7-Zip warns of a tail, and a reader
// from the end (a zip appended to the 7z) sees another archive. Only an
// archive with nothing after its end is clean.
func TestList7zEmptyAndTail(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	z := archivetest.SevenZip(files)
	off, size, crc := binary.LittleEndian.Uint64(z[12:]), binary.LittleEndian.Uint64(z[20:]), le32(z[28:])
	if size == 0 || off == 0 {
		t.Fatal("archivetest.SevenZip wrote an empty archive")
	}
	empty := sz7StartHeader(z[:sz7SignatureLen], 0, 0, 0)
	if l, err := memList(context.Background(), Format7z, Limits{}, empty); err != nil || len(l.Entries) != 0 || len(l.Suspicious) != 0 {
		t.Errorf("empty 7z: %+v, %v", l, err)
	}
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"size zeroed", sz7StartHeader(z, off, 0, crc)},
		{"size zeroed, offset kept, no CRC", sz7StartHeader(z, off, 0, 0)},
		{"size zeroed, CRC kept", sz7StartHeader(z, 0, 0, crc)},
	} {
		l, err := memList(context.Background(), Format7z, Limits{}, tt.data)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: listed %d entries, err %v; want ErrMalformed", tt.name, len(l.Entries), err)
		}
	}

	appended := append(bytes.Clone(z), archivetest.Zip(files)...)
	for _, tt := range []struct {
		name    string
		data    []byte
		entries int
	}{
		{"a zip after a 7z", appended, len(files)},
		{"an empty 7z's start header before another's data", sz7StartHeader(z, 0, 0, 0), 0},
	} {
		l, err := memList(context.Background(), Format7z, Limits{}, tt.data)
		if err != nil || len(l.Entries) != tt.entries {
			t.Errorf("%s: %d entries, %v; want %d", tt.name, len(l.Entries), err, tt.entries)
			continue
		}
		if len(l.Suspicious) != 1 || !strings.Contains(l.Suspicious[0], "after the archive's end") {
			t.Errorf("%s: Suspicious %q, want the tail named", tt.name, l.Suspicious)
		}
	}
	if l, err := memList(context.Background(), Format7z, Limits{}, z); err != nil || len(l.Suspicious) != 0 {
		t.Errorf("plain 7z: Suspicious %q, %v", l.Suspicious, err)
	}
}

// Bytes after a RAR archive's end block (RAR5 and RAR 4.x) are a tail
// that a reader from the end (of a zip appended to the rar) takes for
// another archive: listed past and flagged, in a single archive and in
// the last volume of a set. An archive that ends with its end block, or
// an old one without an end block, is clean.
func TestListRarTailAfterEndBlock(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	tail := archivetest.Zip(files)
	r5, r4 := archivetest.Rar(files), rar4Volumes(files, 1)[0]
	vols := archivetest.RarVolumes(files, 3)
	for _, tt := range []struct {
		name  string
		parts [][]byte
		flag  bool
	}{
		{"RAR5", [][]byte{r5}, false},
		{"RAR5 and a zip", [][]byte{append(bytes.Clone(r5), tail...)}, true},
		{"RAR 4.x", [][]byte{r4}, false},
		{"RAR 4.x and a zip", [][]byte{append(bytes.Clone(r4), tail...)}, true},
		{"RAR5 set", vols, false},
		{"RAR5 set, a zip after its last volume", [][]byte{vols[0], vols[1], append(bytes.Clone(vols[2]), tail...)}, true},
	} {
		l, err := memList(context.Background(), FormatRar, Limits{}, tt.parts...)
		if err != nil || len(l.Entries) != len(files) {
			t.Errorf("%s: %d entries, %v", tt.name, len(l.Entries), err)
			continue
		}
		flagged := len(l.Suspicious) == 1 && strings.Contains(l.Suspicious[0], "after the archive's end")
		if flagged != tt.flag || !tt.flag && len(l.Suspicious) != 0 {
			t.Errorf("%s: Suspicious %q, want the tail flagged: %v", tt.name, l.Suspicious, tt.flag)
		}
	}
}

// A RAR5 archive whose headers are encrypted holds after its encryption
// header at least one encrypted header: a 16-byte IV and a header padded
// to 16 bytes. One cut right after its encryption header (or with less
// than that left) was listed as a whole encrypted archive; it is cut
// short. One with its encrypted headers is still listed as encrypted.
func TestListRarEncryptedHeadersCutShort(t *testing.T) {
	t.Parallel()
	b := archivetest.RarEncryptedHeaders(7)
	for _, cut := range []int{256, 240, 225} {
		l, err := memList(context.Background(), FormatRar, Limits{}, b[:len(b)-cut])
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%d bytes after the encryption header: %+v, %v; want ErrMalformed", 256-cut, l, err)
		}
	}
	for _, cut := range []int{224, 0} {
		l, err := memList(context.Background(), FormatRar, Limits{}, b[:len(b)-cut])
		if err != nil || !l.HeadersEncrypted {
			t.Errorf("%d bytes after the encryption header: %+v, %v; want encrypted headers", 256-cut, l, err)
		}
	}
}
