package archive

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"stashd/archive/archivetest"
)

// zipCentralAt returns the offset of the central directory of z, a zip
// without comment as archivetest.Zip writes it.
func zipCentralAt(t *testing.T, z []byte) int {
	t.Helper()
	end := len(z) - zipEndLen
	if le32(z[end:]) != zipEndSig {
		t.Fatal("no end record at the end")
	}
	return int(le32(z[end+16:]))
}

// A fake end record at the end of the real record's comment claims an
// empty archive: a reader scanning back for the last signature lists
// nothing. The real directory is listed and the lie flagged.
func TestZipEndRecordInComment(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	z := archivetest.Zip(files)
	fake := make([]byte, zipEndLen)
	binary.LittleEndian.PutUint32(fake, zipEndSig)
	real := bytes.Clone(z[len(z)-zipEndLen:])
	binary.LittleEndian.PutUint16(real[20:], uint16(len(fake)))
	lie := append(append(bytes.Clone(z[:len(z)-zipEndLen]), real...), fake...)

	l, err := memList(context.Background(), FormatZip, Limits{}, lie)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, l.Entries, wantEntries(files))
	if len(l.Suspicious) != 1 || !strings.Contains(l.Suspicious[0], "hidden in the archive comment") {
		t.Errorf("Suspicious %q, want the hidden end record", l.Suspicious)
	}
	// The honest archive is not suspicious.
	if l, err := memList(context.Background(), FormatZip, Limits{}, z); err != nil || len(l.Suspicious) != 0 {
		t.Errorf("honest zip: %q, %v", l.Suspicious, err)
	}
}

// A central directory that names another file than the local header (or
// another compressed size) is flagged; one that points at no local
// header, or at data running past the directory, fails verification.
func TestZipCentralDisagreesWithLocal(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	z := archivetest.Zip(files)
	cd := zipCentralAt(t, z)
	// The first entry's local header is at 0 and its name at 30.
	renamed := bytes.Clone(z)
	renamed[30] = 'X'
	l, err := memList(context.Background(), FormatZip, Limits{}, renamed)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Suspicious) != 1 || !strings.Contains(l.Suspicious[0], "disagrees with the local header") {
		t.Errorf("renamed local header: Suspicious %q", l.Suspicious)
	}
	if l.Entries[0].Path != "docs" {
		t.Errorf("listed %q: the central directory's name is the one listed", l.Entries[0].Path)
	}

	resized := bytes.Clone(z)
	// Find the readme's local header and grow its compressed size.
	at := bytes.Index(resized, []byte("PK\x03\x04"+""))
	for i := 0; i < 1; i++ {
		at = bytes.Index(resized[at+4:], []byte("PK\x03\x04")) + at + 4
	}
	if le16(resized[at+6:])&zipFlagDescriptor != 0 {
		// archive/zip writes sizes after the data; the central size is
		// then the only one and cannot disagree here.
		binary.LittleEndian.PutUint16(resized[at+6:], le16(resized[at+6:])&^zipFlagDescriptor)
	}
	binary.LittleEndian.PutUint32(resized[at+18:], 12345)
	if l, err := memList(context.Background(), FormatZip, Limits{}, resized); err != nil || len(l.Suspicious) != 1 {
		t.Errorf("resized local header: Suspicious %q, %v", l.Suspicious, err)
	}

	moved := bytes.Clone(z)
	binary.LittleEndian.PutUint32(moved[cd+42:], 7) // the first entry's local header offset
	_, err = memList(context.Background(), FormatZip, Limits{}, moved)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "no local header") {
		t.Errorf("moved offset: %v", err)
	}

	// The last entry's compressed size runs into the directory.
	last := cd
	for i := 0; i < len(files)-1; i++ {
		last += zipCentralLen + int(le16(z[last+28:])) + int(le16(z[last+30:])) + int(le16(z[last+32:]))
	}
	long := bytes.Clone(z)
	binary.LittleEndian.PutUint32(long[last+20:], 1<<20)
	_, err = memList(context.Background(), FormatZip, Limits{}, long)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "data runs past") {
		t.Errorf("data past the directory: %v", err)
	}
}

// A copy of a zip damaged inside an entry's data, of the same size, lists
// the same directory: only the entry's CRC-32 tells it apart. Stored and
// deflated entries are checked; the undamaged zip verifies.
func TestZipEntryCRCChecked(t *testing.T) {
	t.Parallel()
	data := []byte(strings.Repeat("the same size, other bytes. ", 400))
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		f, err := zw.CreateHeader(&zip.FileHeader{Name: "doc.txt", Method: method})
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		good := buf.Bytes()
		if _, err := memList(context.Background(), FormatZip, Limits{}, good); err != nil {
			t.Fatalf("method %d: the undamaged zip: %v", method, err)
		}
		bad := bytes.Clone(good)
		bad[zipLocalLen+len("doc.txt")+40] ^= 0x01 // inside the entry's data
		l, err := memList(context.Background(), FormatZip, Limits{}, bad)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "doc.txt") {
			t.Errorf("method %d: damaged data listed %d entries with error %v; want ErrMalformed naming the entry", method, len(l.Entries), err)
		}
	}
}
