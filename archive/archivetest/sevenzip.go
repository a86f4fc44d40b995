package archivetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"time"
	"unicode/utf16"
)

// 7z property ids (7-Zip's DOC/7zFormat.txt).
const (
	k7End            = 0x00
	k7Header         = 0x01
	k7MainStreams    = 0x04
	k7FilesInfo      = 0x05
	k7PackInfo       = 0x06
	k7UnpackInfo     = 0x07
	k7SubStreams     = 0x08
	k7Size           = 0x09
	k7CRC            = 0x0a
	k7Folder         = 0x0b
	k7CodersUnpack   = 0x0c
	k7EmptyStream    = 0x0e
	k7EmptyFile      = 0x0f
	k7Name           = 0x11
	k7MTime          = 0x14
	k7WinAttributes  = 0x15
	k7AttrDir        = 0x10
	k7AttrArchive    = 0x20
	k7AttrUnixExt    = 0x8000 // the high 16 bits hold a Unix st_mode
	k7StartHeaderLen = 32
)

// SevenZip returns a 7z archive of files, each non-empty file stored
// (method Copy) in a folder of its own, with a plain (not compressed)
// header. bodgit/sevenzip and 7-Zip read it. Names are stored as UTF-16:
// invalid UTF-8 becomes U+FFFD, and a NUL makes SevenZip panic.
func SevenZip(files []File) []byte {
	var packed bytes.Buffer
	var sizes []uint64
	var crcs []uint32
	emptyStream := make([]bool, len(files))
	var emptyFile []bool
	for i, f := range files {
		if f.Dir || len(f.Data) == 0 {
			emptyStream[i] = true
			emptyFile = append(emptyFile, !f.Dir)
			continue
		}
		packed.Write(f.Data)
		sizes = append(sizes, uint64(len(f.Data)))
		crcs = append(crcs, crc(f.Data))
	}

	h := &sz7Writer{}
	h.byte(k7Header)
	if len(sizes) > 0 {
		h.byte(k7MainStreams)
		h.byte(k7PackInfo)
		h.number(0) // pack position
		h.number(uint64(len(sizes)))
		h.byte(k7Size)
		for _, s := range sizes {
			h.number(s)
		}
		h.byte(k7End)

		h.byte(k7UnpackInfo)
		h.byte(k7Folder)
		h.number(uint64(len(sizes)))
		h.byte(0) // not external
		for range sizes {
			h.number(1)  // one coder
			h.byte(0x01) // simple coder, 1-byte method id
			h.byte(0x00) // Copy
		}
		h.byte(k7CodersUnpack)
		for _, s := range sizes {
			h.number(s)
		}
		h.byte(k7CRC)
		h.byte(1) // all defined
		for _, c := range crcs {
			h.u32(c)
		}
		h.byte(k7End)
		// An empty SubStreamsInfo: one stream per folder. 7-Zip would omit it,
		// but bodgit/sevenzip maps every file to folder 0 without it.
		h.byte(k7SubStreams)
		h.byte(k7End)
		h.byte(k7End) // end of streams info
	}
	if len(files) > 0 {
		h.byte(k7FilesInfo)
		h.number(uint64(len(files)))
		if len(emptyFile) > 0 {
			h.property(k7EmptyStream, bitVector(emptyStream))
			h.property(k7EmptyFile, bitVector(emptyFile))
		}
		var names bytes.Buffer
		names.WriteByte(0) // not external
		var times, attrs bytes.Buffer
		times.Write([]byte{1, 0}) // all defined, not external
		attrs.Write([]byte{1, 0})
		for _, f := range files {
			if strings.ContainsRune(f.Name, 0) {
				panic(fmt.Sprintf("archivetest: 7z cannot store a NUL in name %q", f.Name))
			}
			for _, u := range utf16.Encode([]rune(f.Name)) {
				binary.Write(&names, binary.LittleEndian, u)
			}
			names.Write([]byte{0, 0})
			binary.Write(&times, binary.LittleEndian, fileTime(f.modTime()))
			attr := uint32(k7AttrArchive | k7AttrUnixExt | 0o100644<<16)
			if f.Dir {
				attr = k7AttrDir | k7AttrUnixExt | 0o040755<<16
			}
			binary.Write(&attrs, binary.LittleEndian, attr)
		}
		h.property(k7Name, names.Bytes())
		h.property(k7MTime, times.Bytes())
		h.property(k7WinAttributes, attrs.Bytes())
		h.byte(k7End)
	}
	h.byte(k7End)

	header := h.buf.Bytes()
	out := make([]byte, k7StartHeaderLen, k7StartHeaderLen+packed.Len()+len(header))
	copy(out, []byte{'7', 'z', 0xbc, 0xaf, 0x27, 0x1c, 0, 4})
	le := binary.LittleEndian
	le.PutUint64(out[12:], uint64(packed.Len()))
	le.PutUint64(out[20:], uint64(len(header)))
	le.PutUint32(out[28:], crc(header))
	le.PutUint32(out[8:], crc(out[12:32]))
	out = append(out, packed.Bytes()...)
	return append(out, header...)
}

// fileTime converts t to a Windows FILETIME (100 ns ticks since 1601).
func fileTime(t time.Time) uint64 {
	const epochDiff = 116444736000000000 // 1601-01-01 to 1970-01-01 in 100 ns ticks
	return uint64(t.UnixNano()/100) + epochDiff
}

// bitVector packs bits most significant first, as 7z does.
func bitVector(bits []bool) []byte {
	b := make([]byte, (len(bits)+7)/8)
	for i, set := range bits {
		if set {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	return b
}

type sz7Writer struct{ buf bytes.Buffer }

func (w *sz7Writer) byte(b byte) { w.buf.WriteByte(b) }

func (w *sz7Writer) u32(v uint32) { binary.Write(&w.buf, binary.LittleEndian, v) }

// number writes a 7z NUMBER: the first byte's leading one bits count the
// little-endian bytes that follow; its remaining bits are the top of the value.
func (w *sz7Writer) number(v uint64) {
	for n := 0; n < 8; n++ {
		// With n extra bytes the first byte keeps 7-n value bits.
		if v < uint64(1)<<(8*n+7-n) {
			mask := byte(uint16(0xff00) >> n)
			w.buf.WriteByte(mask | byte(v>>(8*n)))
			for i := 0; i < n; i++ {
				w.buf.WriteByte(byte(v >> (8 * i)))
			}
			return
		}
	}
	w.buf.WriteByte(0xff)
	binary.Write(&w.buf, binary.LittleEndian, v)
}

func (w *sz7Writer) property(id byte, data []byte) {
	w.byte(id)
	w.number(uint64(len(data)))
	w.buf.Write(data)
}
