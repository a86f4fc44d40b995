package archive

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"

	"github.com/nwaples/rardecode/v2"

	"stashd/archive/archivetest"
)

// rar4Volumes writes a RAR 1.5-4.x set of n volumes with stored files, the
// format WinRAR 3.x and 4.x write (no RAR4 writer exists in Go or Debian).
// Names are stored with the "unicode" encoding so that the walker's decoder
// is exercised; file data is spread over the volumes.
func rar4Volumes(files []archivetest.File, n int) [][]byte {
	le := binary.LittleEndian
	block := func(w *bytes.Buffer, typ byte, flags uint16, fields []byte, data []byte) {
		h := []byte{typ, 0, 0, 0, 0}
		le.PutUint16(h[1:], flags)
		le.PutUint16(h[3:], uint16(7+len(fields)))
		h = append(h, fields...)
		w.Write(le.AppendUint16(nil, uint16(crc32.ChecksumIEEE(h))))
		w.Write(h)
		w.Write(data)
	}
	total := 0
	for _, f := range files {
		total += len(f.Data)
	}
	capacity := max((total+n-1)/n, 1)

	var vols [][]byte
	var cur bytes.Buffer
	room := capacity
	start := func() {
		cur.Reset()
		cur.WriteString("Rar!\x1a\x07\x00")
		flags := uint16(0)
		if n > 1 {
			flags = 0x0001 | 0x0010 // volume, new naming
			if len(vols) == 0 {
				flags |= 0x0100 // first volume
			}
		}
		block(&cur, 0x73, flags, make([]byte, 6), nil)
		room = capacity
	}
	finish := func(last bool) {
		flags := uint16(0)
		if !last {
			flags = 0x0001
		}
		block(&cur, 0x7b, flags, nil, nil)
		vols = append(vols, bytes.Clone(cur.Bytes()))
	}
	file := func(f archivetest.File, chunk []byte, split uint16) {
		name := encodeRar4Name(f.Name)
		flags := uint16(0x8000|0x0200) | split
		attr := uint32(0o100644)
		if f.Dir {
			flags |= 0x00e0
			attr = 0o040755
		}
		var b []byte
		b = le.AppendUint32(b, uint32(len(chunk)))  // packed size
		b = le.AppendUint32(b, uint32(len(f.Data))) // unpacked size
		b = append(b, 3)                            // host: Unix
		b = le.AppendUint32(b, crc32.ChecksumIEEE(f.Data))
		b = le.AppendUint32(b, 0x58210000) // DOS time
		b = append(b, 29, 0x30)            // version 2.9, method store
		b = le.AppendUint16(b, uint16(len(name)))
		b = le.AppendUint32(b, attr)
		b = append(b, name...)
		block(&cur, 0x74, flags, b, chunk)
	}

	start()
	for _, f := range files {
		data, split := f.Data, uint16(0)
		for {
			if room == 0 && len(vols) < n-1 {
				finish(false)
				start()
			}
			chunk := data
			if len(vols) < n-1 && len(chunk) > room {
				chunk = chunk[:room]
			}
			data = data[len(chunk):]
			s := split
			if len(data) > 0 {
				s |= 0x0002 // split after
			}
			file(f, chunk, s)
			room -= len(chunk)
			split = 0x0001 // split before, for the next chunk
			if len(data) == 0 {
				break
			}
		}
	}
	for len(vols) < n-1 {
		finish(false)
		start()
	}
	finish(true)
	return vols
}

// encodeRar4Name stores name as an OEM approximation, a zero byte, and the
// UTF-16 code units in RAR's encoding (mode 2: a full 16-bit unit each).
func encodeRar4Name(name string) []byte {
	units := utf16.Encode([]rune(name))
	out := make([]byte, 0, len(units)*3+4)
	for _, u := range units {
		if u < 0x80 {
			out = append(out, byte(u))
		} else {
			out = append(out, '?')
		}
	}
	out = append(out, 0, 0) // separator, high byte
	for i := 0; i < len(units); i += 4 {
		chunk := units[i:min(i+4, len(units))]
		flags := byte(0)
		for j := range chunk {
			flags |= 2 << (6 - 2*j)
		}
		out = append(out, flags)
		for _, u := range chunk {
			out = binary.LittleEndian.AppendUint16(out, u)
		}
	}
	return out
}

func TestListRar4(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	for _, n := range []int{1, 3} {
		vols := rar4Volumes(files, n)
		l, err := List(context.Background(), FormatRar, writeVolumes(t, vols...), Limits{})
		if err != nil {
			t.Fatalf("%d volumes: %v", n, err)
		}
		checkEntries(t, l.Entries, wantEntries(files))

		// rardecode agrees on names, sizes and contents.
		dir := t.TempDir()
		for i, v := range vols {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("s.part%d.rar", i+1)), v, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		rc, err := rardecode.OpenReader(filepath.Join(dir, "s.part1.rar"))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			h, err := rc.Next()
			if errors.Is(err, io.EOF) {
				if i != len(files) {
					t.Errorf("rardecode found %d files", i)
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc)
			if err != nil {
				t.Fatalf("rardecode read %s: %v", h.Name, err)
			}
			if h.Name != l.Entries[i].Path || h.IsDir != l.Entries[i].Dir || !bytes.Equal(data, files[i].Data) {
				t.Errorf("rardecode entry %d: %q dir %v %d bytes; List: %+v", i, h.Name, h.IsDir, len(data), l.Entries[i])
			}
		}
		rc.Close()
	}
}

func TestListRar4MissingVolume(t *testing.T) {
	t.Parallel()
	vols := rar4Volumes(sampleFiles(), 3)
	l, err := memList(context.Background(), FormatRar, Limits{}, vols[:2]...)
	wantListError(t, err, FormatRar, "next volume missing", ErrMalformed)
	if len(l.Entries) < 3 {
		t.Errorf("%d entries before the missing volume", len(l.Entries))
	}
}

func TestDecodeRar4Name(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"plain.txt", "данные/файл.bin", "日本語の名前.txt", "emoji 😀.txt", ""} {
		if got := decodeRar4Name(encodeRar4Name(name)); got != name {
			t.Errorf("decode(encode(%q)) = %q", name, got)
		}
	}
	// Hand-made encodings: mode 0 (low byte), 1 (with the high byte) and 3
	// (a run copied from the OEM name, with and without a correction).
	tests := []struct {
		enc  []byte
		want string
	}{
		{[]byte("ab\x00\x04\x10a\x04"), "a\u0404"},                // high 0x04; flags 00 01: 'a', 0x04|0x0400
		{[]byte("abcd\x00\x00\xc0\x02"), "abcd"},                  // flags 11: copy 2+2 OEM bytes
		{[]byte("abc\x00\x04\xc0\x81\x01"), "\u0462\u0463\u0464"}, // copy 1+2 with correction 1 and high byte 0x04
		{[]byte("utf8 name"), "utf8 name"},                        // no zero byte: UTF-8
		{[]byte("ab\x00"), "ab"},                                  // no encoded part
		{[]byte("ab\x00\x00\x80"), ""},                            // mode 2 without its two bytes
		{[]byte("ab\x00\x00\xc0"), ""},                            // mode 3 without its length
		{[]byte("abcdef\x00\x00\x00abcd"), "abcd"},                // the encoded part ends before the OEM name
	}
	for _, tt := range tests {
		if got := decodeRar4Name(tt.enc); got != tt.want {
			t.Errorf("decodeRar4Name(%q) = %q, want %q", tt.enc, got, tt.want)
		}
	}
}

func TestListRarEncryptedHeaders(t *testing.T) {
	t.Parallel()
	// RAR5: an archive encryption block right after the signature (rar -hp).
	body := []byte{4, 0, 0, 0, 15} // type 4, no flags; version 0, flags 0, KDF count 15
	body = append(body, make([]byte, 16)...)
	block := append([]byte{byte(len(body))}, body...)
	rar5 := append([]byte("Rar!\x1a\x07\x01\x00"), binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(block))...)
	rar5 = append(rar5, block...)
	rar5 = append(rar5, make([]byte, 64)...) // encrypted headers follow

	// RAR4: the main header's "block headers are encrypted" flag.
	rar4 := rar4Volumes(sampleFiles(), 1)[0]
	main := rar4[7:20]
	main[3] |= 0x80
	binary.LittleEndian.PutUint16(main, uint16(crc32.ChecksumIEEE(main[2:])))

	for name, data := range map[string][]byte{"rar5": rar5, "rar4": rar4} {
		l, err := memList(context.Background(), FormatRar, Limits{}, data)
		if err != nil || !l.Encrypted || len(l.Entries) != 0 {
			t.Errorf("%s: Encrypted %v, %d entries, %v", name, l.Encrypted, len(l.Entries), err)
		}
	}
}

// Every volume of a RAR set says so in its main header, RAR4 and RAR5
// alike: a first volume listed alone, stopped by a limit before its end
// block, is still known for a volume. A single archive is not one.
func TestListRarVolumeFlag(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	for _, tc := range []struct {
		name string
		vols func(n int) [][]byte
	}{
		{"RAR4", func(n int) [][]byte { return rar4Volumes(files, n) }},
		{"RAR5", func(n int) [][]byte { return archivetest.RarVolumes(files, n) }},
	} {
		l, err := memList(context.Background(), FormatRar, Limits{MaxEntries: 1}, tc.vols(3)[0])
		if err != nil || !l.Truncated || !l.Volume {
			t.Errorf("%s first volume alone, one entry: truncated %v, volume %v, %v; want a truncated volume", tc.name, l.Truncated, l.Volume, err)
		}
		l, err = memList(context.Background(), FormatRar, Limits{}, tc.vols(1)...)
		if err != nil || l.Volume {
			t.Errorf("%s single archive: volume %v, %v; want no volume", tc.name, l.Volume, err)
		}
	}
}
