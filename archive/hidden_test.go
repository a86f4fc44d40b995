package archive

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"stashd/archive/archivetest"
)

// rawZipEntry is one entry of a zip written by hand: its stored data and
// where its central directory entry says its local header is.
type rawZipEntry struct {
	name   string
	data   []byte
	offset uint32
}

// zipLocalRecord is a local header for a stored entry, with its data.
func zipLocalRecord(name string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, zipLocalSig)
	b = binary.LittleEndian.AppendUint16(b, 10) // version needed
	b = binary.LittleEndian.AppendUint16(b, 0)  // flags
	b = binary.LittleEndian.AppendUint16(b, 0)  // stored
	b = binary.LittleEndian.AppendUint32(b, 0)  // time, date
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(data))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
	b = binary.LittleEndian.AppendUint16(b, 0)
	return append(append(b, name...), data...)
}

// zipWithDirectory appends to body (the local records) a central
// directory of entries and its end record.
func zipWithDirectory(body []byte, entries []rawZipEntry) []byte {
	cd := []byte{}
	for _, e := range entries {
		b := binary.LittleEndian.AppendUint32(nil, zipCentralSig)
		b = binary.LittleEndian.AppendUint16(b, 10) // made by
		b = binary.LittleEndian.AppendUint16(b, 10) // needed
		b = binary.LittleEndian.AppendUint16(b, 0)  // flags
		b = binary.LittleEndian.AppendUint16(b, 0)  // stored
		b = binary.LittleEndian.AppendUint32(b, 0)  // time, date
		b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(e.data))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.data)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.data)))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(e.name)))
		b = append(b, make([]byte, 12)...) // extra, comment, disk, attributes
		b = binary.LittleEndian.AppendUint32(b, e.offset)
		cd = append(append(cd, b...), e.name...)
	}
	end := binary.LittleEndian.AppendUint32(nil, zipEndSig)
	end = append(end, 0, 0, 0, 0)
	end = binary.LittleEndian.AppendUint16(end, uint16(len(entries)))
	end = binary.LittleEndian.AppendUint16(end, uint16(len(entries)))
	end = binary.LittleEndian.AppendUint32(end, uint32(len(cd)))
	end = binary.LittleEndian.AppendUint32(end, uint32(len(body)))
	end = append(end, 0, 0)
	return append(append(bytes.Clone(body), cd...), end...)
}

// Entries whose bytes overlap (one entry's data holds another's local
// header and data; many directory entries name one local record) are the
// overlapping-files zip bomb: every header agrees with the directory and
// every CRC-32 holds, yet the sizes listed add up to far more than the
// file, and extracting it writes the same bytes many times. The listing
// keeps every entry and flags the structure; an honest zip is not flagged.
func TestZipOverlappingEntriesAreSuspicious(t *testing.T) {
	t.Parallel()
	inner := zipLocalRecord("b.txt", []byte("the inner file"))
	outerData := inner
	body := zipLocalRecord("a.txt", outerData)
	nested := zipWithDirectory(body, []rawZipEntry{
		{name: "a.txt", data: outerData, offset: 0},
		{name: "b.txt", data: []byte("the inner file"), offset: uint32(zipLocalLen + len("a.txt"))},
	})

	kernel := bytes.Repeat([]byte("k"), 1000)
	shared := zipLocalRecord("same.txt", kernel)
	var many []rawZipEntry
	for range 500 {
		many = append(many, rawZipEntry{name: "same.txt", data: kernel, offset: 0})
	}
	repeated := zipWithDirectory(shared, many)

	for _, tt := range []struct {
		name    string
		zip     []byte
		entries int
	}{{"one entry's data holds another", nested, 2}, {"500 entries of one record", repeated, 500}} {
		l, err := memList(context.Background(), FormatZip, Limits{}, tt.zip)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if len(l.Entries) != tt.entries {
			t.Errorf("%s: %d entries listed, want %d", tt.name, len(l.Entries), tt.entries)
		}
		if len(l.Suspicious) != 1 || !strings.Contains(l.Suspicious[0], "overlap") {
			t.Errorf("%s: Suspicious %q, want the overlapping entries named", tt.name, l.Suspicious)
		}
	}

	honest := zipWithDirectory(append(zipLocalRecord("a.txt", []byte("one")), zipLocalRecord("b.txt", []byte("two"))...), []rawZipEntry{
		{name: "a.txt", data: []byte("one"), offset: 0},
		{name: "b.txt", data: []byte("two"), offset: uint32(zipLocalLen + len("a.txt") + 3)},
	})
	if l, err := memList(context.Background(), FormatZip, Limits{}, honest); err != nil || len(l.Suspicious) != 0 || len(l.Entries) != 2 {
		t.Errorf("honest zip: %d entries, Suspicious %q, %v", len(l.Entries), l.Suspicious, err)
	}
	// A zip made by Info-ZIP with data descriptors (streamed from a pipe)
	// is not flagged either.
	if _, err := exec.LookPath("zip"); err == nil {
		dir := t.TempDir()
		cmd := exec.Command("sh", "-c", "printf 'streamed data' | zip -q -fd "+filepath.Join(dir, "s.zip")+" - && cd "+dir+" && printf x > f && zip -q s.zip f")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("zip: %v: %s", err, out)
		}
		l, err := List(context.Background(), FormatZip, []string{filepath.Join(dir, "s.zip")}, Limits{})
		if err != nil || len(l.Suspicious) != 0 || len(l.Entries) != 2 {
			t.Errorf("Info-ZIP zip with a data descriptor: %d entries, Suspicious %q, %v", len(l.Entries), l.Suspicious, err)
		}
	}
}

// Two tars one after the other in one file (cat a.tar b.tar, or two gzip
// members each holding a whole tar.gz): tar stops at the first end blocks
// and lists the first, tar --ignore-zeros lists both. The listing shows
// the first archive's entries and flags the second as hidden, for a plain
// tar and for compressed ones; a tar whose record padding follows its end
// is not flagged.
func TestListTarHiddenAfterItsEnd(t *testing.T) {
	t.Parallel()
	one, two := archivetest.Tar(tailOne), archivetest.Tar(tailTwo)
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	for _, tt := range []struct {
		name   string
		format Format
		data   []byte
	}{
		{"plain tars concatenated", FormatTar, append(bytes.Clone(one), two...)},
		{"gzip members of two tars", FormatTarGz, append(gz(one), gz(two)...)},
		{"one gzip of two tars", FormatTarGz, gz(append(bytes.Clone(one), two...))},
	} {
		l, err := memList(context.Background(), tt.format, Limits{}, tt.data)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if len(l.Entries) != 1 || l.Entries[0].Path != "first/one.bin" {
			t.Errorf("%s: entries %+v, want the first tar's", tt.name, l.Entries)
		}
		if len(l.Suspicious) != 1 || !strings.Contains(l.Suspicious[0], "another tar") {
			t.Errorf("%s: Suspicious %q, want the hidden tar named", tt.name, l.Suspicious)
		}
	}
	padded := append(bytes.Clone(one), make([]byte, 20<<10)...)
	for _, tt := range []struct {
		format Format
		data   []byte
	}{{FormatTar, padded}, {FormatTarGz, gz(padded)}} {
		if l, err := memList(context.Background(), tt.format, Limits{}, tt.data); err != nil || len(l.Suspicious) != 0 {
			t.Errorf("%s with padding: Suspicious %q, %v", tt.format, l.Suspicious, err)
		}
	}
}
