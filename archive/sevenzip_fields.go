package archive

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
)

// szReader reads 7z header fields from an in-memory header. Reading past the
// end sets err (once) and returns zeros, so parsers check err at the end of
// a section rather than after every field.
type szReader struct {
	b   []byte
	off int
	err error
}

func (r *szReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *szReader) byte() byte {
	if r.off >= len(r.b) {
		r.fail("header ends early")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// number reads a 7z NUMBER: the count of leading one bits of the first byte
// is the count of extra little-endian bytes; the rest of it is the top.
func (r *szReader) number() uint64 {
	first := r.byte()
	var v uint64
	mask := byte(0x80)
	for i := 0; i < 8; i++ {
		if first&mask == 0 {
			return v | uint64(first&(mask-1))<<(8*i)
		}
		v |= uint64(r.byte()) << (8 * i)
		mask >>= 1
	}
	return v
}

// count reads a NUMBER used as an item count and checks that the header has
// at least one byte left per item, the smallest any item takes. It bounds
// every loop by the header's size.
func (r *szReader) count(what string) int {
	v := r.number()
	if v > uint64(len(r.b)-r.off) {
		r.fail("%s count %d larger than the header", what, v)
		return 0
	}
	return int(v)
}

func (r *szReader) bytes(n uint64) []byte {
	if n > uint64(len(r.b)-r.off) {
		r.fail("header ends early")
		r.off = len(r.b)
		return nil
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *szReader) u32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return le32(b)
}

// expect reads one id and fails unless it is want.
func (r *szReader) expect(want byte) {
	if got := r.byte(); got != want && r.err == nil {
		r.fail("unexpected property id %#x, want %#x", got, want)
	}
}

// skipDigests skips a digests record of n items (defined bits, then CRCs).
func (r *szReader) skipDigests(n int) {
	defined := n
	if r.byte() == 0 {
		bits := r.bytes(uint64((n + 7) / 8))
		defined = 0
		for i := 0; i < n && bits != nil; i++ {
			if bitSet(bits, i) {
				defined++
			}
		}
	}
	r.bytes(uint64(defined) * 4)
}

func bitSet(bits []byte, i int) bool {
	return i/8 < len(bits) && bits[i/8]&(0x80>>(i%8)) != 0
}

// utf16Name reads one zero-terminated UTF-16LE name from b. lossy is true
// when an unpaired surrogate had to be replaced with U+FFFD.
func utf16Name(b []byte) (name string, lossy bool, rest []byte) {
	var u []uint16
	for len(b) >= 2 {
		c := binary.LittleEndian.Uint16(b)
		b = b[2:]
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	var sb strings.Builder
	for i := 0; i < len(u); i++ {
		r := rune(u[i])
		if utf16.IsSurrogate(r) {
			if i+1 < len(u) {
				if d := utf16.DecodeRune(r, rune(u[i+1])); d != unicode.ReplacementChar {
					sb.WriteRune(d)
					i++
					continue
				}
			}
			r, lossy = unicode.ReplacementChar, true
		}
		sb.WriteRune(r)
	}
	return sb.String(), lossy, b
}

// sz7Substreams yields the sizes of the data streams in file order, walking
// folders, their unpack sizes, packed streams, substream counts and
// substream sizes in step. Past each call of next, cur describes the folder
// the stream is in, for the data check (sz7Data).
type sz7Substreams struct {
	s       *sz7Streams
	folders szReader
	unpack  szReader
	packs   szReader // the packed streams' sizes
	counts  *szCounts
	sizes   szReader
	folder  int    // folders started
	left    uint64 // substreams left in the current folder
	total   uint64 // the current folder's unpacked size
	used    uint64 // bytes of it given to earlier substreams
	// packOff is where the next folder's packed streams begin, from the
	// archive's start; -1 once the pack records do not say (missing, or
	// the folders use more packed streams than there are: packsLeft).
	packOff   int64
	packsLeft int
	// keepCoders makes cur keep the folder's coders; the data check
	// clears it once it checks no more, so a long listing allocates
	// nothing per folder.
	keepCoders bool
	cur        sz7Folder
	// curOff and curPack locate the current folder's first packed
	// stream (curOff -1: unknown); began says that the stream next gave
	// last is the first of its folder.
	curOff  int64
	curPack uint64
	began   bool
}

func newSz7Substreams(b []byte, s *sz7Streams) *sz7Substreams {
	ss := &sz7Substreams{
		s:          s,
		folders:    szReader{b: b, off: s.foldersOff},
		unpack:     szReader{b: b, off: s.unpackOff},
		packs:      szReader{b: b, off: s.packSizesOff},
		counts:     s.counts(b),
		sizes:      szReader{b: b, off: s.sizesOff},
		packOff:    -1,
		packsLeft:  s.numPack,
		keepCoders: true,
	}
	if s.packSizesOff >= 0 {
		ss.packOff = sz7SignatureLen + int64(min(s.packPos, 1<<62))
	}
	return ss
}

func (ss *sz7Substreams) next() (uint64, error) {
	ss.began = false
	for ss.left == 0 {
		if ss.folder >= ss.s.numFolders {
			return 0, fmt.Errorf("more files than data streams")
		}
		f := ss.folders.folder(ss.keepCoders)
		for i := range f.numOut {
			if v := ss.unpack.number(); i == f.mainOut {
				ss.total = v
			}
		}
		ss.left = ss.counts.next()
		ss.used = 0
		ss.folder++
		if ss.folders.err != nil || ss.unpack.err != nil || ss.counts.err != nil {
			return 0, fmt.Errorf("folder records end early")
		}
		ss.cur, ss.began = f, true
		ss.nextPacked(f)
	}
	ss.left--
	if ss.left == 0 {
		if ss.used > ss.total {
			return 0, fmt.Errorf("substream sizes exceed their folder")
		}
		return ss.total - ss.used, nil
	}
	if ss.s.sizesOff < 0 {
		return 0, fmt.Errorf("substream sizes missing")
	}
	v := ss.sizes.number()
	if ss.sizes.err != nil {
		return 0, ss.sizes.err
	}
	ss.used += v
	return v, nil
}

// nextPacked locates folder f's packed streams, the next ones in the pack
// records (curOff, curPack), and moves past them.
func (ss *sz7Substreams) nextPacked(f sz7Folder) {
	ss.curOff, ss.curPack = ss.packOff, 0
	if ss.packOff < 0 {
		return
	}
	var packed uint64
	for k := range f.packed {
		v := ss.packs.number()
		if k == 0 {
			ss.curPack = v
		}
		packed += min(v, 1<<62)
	}
	if ss.packsLeft -= f.packed; ss.packsLeft < 0 || ss.packs.err != nil || packed > 1<<62 {
		ss.packOff, ss.curOff = -1, -1
		return
	}
	ss.packOff += int64(packed)
}

// sz7CRCValue is one stream's CRC-32 as the header records it.
type sz7CRCValue struct {
	v   uint32
	has bool
}

// substreamCRCs returns the CRC-32 of every substream, in order: a folder
// of one stream may give it in its own digest, the others are in the
// substreams' digests record. A CRC the header does not record is left
// unknown. The result is no longer than the substream count, which
// streams bounded by the header's size.
func (s *sz7Streams) substreamCRCs(b []byte) []sz7CRCValue {
	out := make([]sz7CRCValue, 0, min(s.numSubstream, uint64(len(b))))
	folderCRC := szReader{b: b, off: s.crcOff}
	var sub szReader
	var subDefined []byte
	subAll := false
	if s.digestsOff >= 0 {
		sub = szReader{b: b, off: s.digestsOff}
		subAll = sub.byte() != 0
		if !subAll {
			subDefined = sub.bytes(uint64((s.digestsN + 7) / 8))
		}
	}
	c := s.counts(b)
	subIndex := 0
	for i := range s.numFolders {
		k := c.next()
		if c.err != nil || uint64(len(out))+k > s.numSubstream {
			return out
		}
		var fc sz7CRCValue
		if s.folderHasCRC(i) {
			fc = sz7CRCValue{folderCRC.u32(), folderCRC.err == nil}
		}
		if k == 1 && s.folderHasCRC(i) {
			out = append(out, fc)
			continue
		}
		for range k {
			var v sz7CRCValue
			if s.digestsOff >= 0 && (subAll || bitSet(subDefined, subIndex)) {
				v = sz7CRCValue{sub.u32(), true}
				v.has = sub.err == nil
			}
			subIndex++
			out = append(out, v)
		}
	}
	return out
}
