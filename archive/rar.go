package archive

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strings"
	"unicode/utf16"
)

// The RAR walker reads block headers itself and seeks over file data. It
// does not use rardecode's Reader: Reader.Next prepares a decoder for every
// compressed entry, allocating a window as large as the entry's dictionary
// (up to 4 GiB from a header field) and clearing it for each non-solid
// entry, so listing an archive with one big file followed by many small ones
// costs a full-window memset per entry; rardecode.List keeps every header
// and has no way to stop early. The block layouts follow RARLAB's
// "RAR 5.0 archive format" and the RAR 1.5-4.x technote (as implemented by
// unrar and rardecode). Tests cross-check this walker against rardecode.

const (
	rarSigPrefix = "Rar!\x1a\x07"
	rar5Sig      = rarSigPrefix + "\x01\x00"
	rar4Sig      = rarSigPrefix + "\x00"
	rar5MaxBlock = 2 << 20 // RAR5 header sizes are at most 3 vint bytes: 2 MiB

	// RAR5 header types and flags.
	rar5Main          = 1
	rar5File          = 2
	rar5Encryption    = 4
	rar5End           = 5
	rar5HasExtra      = 0x1
	rar5HasData       = 0x2
	rar5DataFromPrev  = 0x8  // this block continues a file from the previous volume
	rar5DataToNext    = 0x10 // the file goes on in the next volume
	rar5ArcVolume     = 0x1  // the archive is a volume of a multi-volume set
	rar5ArcVolNum     = 0x2
	rar5FileDir       = 0x1
	rar5FileMtime     = 0x2
	rar5FileCRC       = 0x4
	rar5FileNoSize    = 0x8
	rar5EndNotLast    = 0x1
	rar5ExtraCrypt    = 1
	rar5ExtraRedirect = 5

	// RAR 1.5-4.x block types and flags.
	rar4Main         = 0x73
	rar4File         = 0x74
	rar4Comment      = 0x75
	rar4AV           = 0x76
	rar4OldService   = 0x77
	rar4Sign         = 0x79
	rar4Service      = 0x7a
	rar4End          = 0x7b
	rar4LongBlock    = 0x8000
	rar4MainVolume   = 0x0001 // the archive is a volume of a multi-volume set
	rar4MainComment  = 0x0002
	rar4MainPassword = 0x0080 // block headers are encrypted
	rar4SplitBefore  = 0x0001
	rar4SplitAfter   = 0x0002
	rar4Encrypted    = 0x0004
	rar4DirMask      = 0x00e0
	rar4LargeFile    = 0x0100
	rar4Unicode      = 0x0200
	rar4EndNextVol   = 0x0001
	rar4FileFixedLen = 32
)

// rarVolume walks the headers of one volume file.
type rarVolume struct {
	w           *walk
	r           io.ReaderAt
	size        int64
	index       int    // 0-based position in the set
	headerBytes *int64 // header bytes read over the whole set
	buf         []byte
	stop        bool  // listing ended early: encrypted headers or a limit
	end         int64 // where the end block ends, 0 without one
	split       *rarSplit
	files       int // the file blocks walked in this volume
}

// rarSplit is the file the last file block walked leaves unfinished, to
// be continued by the next volume's first file block: a volume of another
// set named as the next (a stray x.part2.rar of another upload) carries
// valid headers and the right volume number, but continues another file.
type rarSplit struct {
	open bool   // the block goes on in the next volume
	name string // the file's stored name
	from int    // the volume it was walked in, 1-based
}

// chain checks a file block (its stored name; fromPrev: it continues a
// file of the previous volume; toNext: the next volume continues it)
// against the file the previous volume leaves unfinished, when it is the
// first of its volume, and records what it leaves unfinished itself. The
// name is what unrar and rardecode check a continuation by.
func (v *rarVolume) chain(name string, fromPrev, toNext bool) error {
	s := v.split
	if v.files++; v.files == 1 && v.index > 0 {
		switch {
		case s.open && (!fromPrev || name != s.name):
			return v.notContinuing(s)
		case !s.open && fromPrev:
			return notOneArchive(v.w.format, "volume %d continues %q, which volume %d does not leave unfinished: it is another archive's",
				v.index+1, cutUTF8(name, 200), v.index)
		}
	}
	*s = rarSplit{open: toNext, name: name, from: v.index + 1}
	return nil
}

// notContinuing is the error for volume v, which does not continue the
// file s an earlier volume leaves unfinished.
func (v *rarVolume) notContinuing(s *rarSplit) error {
	return notOneArchive(v.w.format, "volume %d does not continue %q, which volume %d leaves unfinished: it is another archive's",
		v.index+1, cutUTF8(s.name, 200), s.from)
}

func listRar(w *walk, src *partSet) error {
	var headerBytes int64
	var split rarSplit
	version := 0
	more := false
	for i := range src.Len() {
		r, size := src.Part(i)
		v := &rarVolume{w: w, r: r, size: size, index: i, headerBytes: &headerBytes, split: &split}
		pos, ver, err := v.signature()
		if err != nil {
			return err
		}
		if version != 0 && ver != version {
			return malformed(w.format, "volume %d is RAR%d, volume 1 is RAR%d", i+1, ver, version)
		}
		version = ver
		if ver == 5 {
			more, err = v.list5(pos)
		} else {
			more, err = v.list4(pos)
		}
		if err != nil || v.stop {
			return err
		}
		if i > 0 && v.files == 0 && split.open {
			return v.notContinuing(&split)
		}
		if v.end > 0 && v.end < size {
			// A reader from the end (of a zip appended to the rar) sees
			// another archive there.
			w.suspect(fmt.Sprintf("%d bytes after the archive's end in volume %d", size-v.end, i+1))
		}
		if !more && i < src.Len()-1 {
			return notOneArchive(w.format, "volume %d is the last of its archive, but %d parts were given", i+1, src.Len())
		}
	}
	if more {
		return volumeMissing(w.format, "archive continues after volume %d: next volume missing", src.Len())
	}
	return nil
}

// signature finds the RAR signature: at the start of a volume, or within the
// first sfxSearch bytes of a first volume (a self-extractor stub before it),
// where Detect finds it. When Detect found it past a stub (Listing.Offset),
// its header checked, it is read there, not searched for again.
func (v *rarVolume) signature() (pos int64, version int, err error) {
	n := min(v.size, int64(len(rar5Sig)))
	if v.index == 0 {
		n = min(v.size, sfxSearch) // as far as Detect looks
	}
	var start int64
	if v.index == 0 && v.w.listing.Offset > 0 && v.w.listing.Offset < v.size {
		start = v.w.listing.Offset
	}
	head := make([]byte, min(n-start, int64(len(rar5Sig))))
	if _, err := v.r.ReadAt(head, start); err != nil && err != io.EOF {
		return 0, 0, v.w.readErr("signature", err)
	}
	at := 0
	if start == 0 && !bytes.HasPrefix(head, []byte(rarSigPrefix)) {
		if n <= int64(len(head)) {
			return 0, 0, malformed(v.w.format, "RAR signature not found in volume %d", v.index+1)
		}
		head = make([]byte, n)
		if _, err := v.r.ReadAt(head, 0); err != nil && err != io.EOF {
			return 0, 0, v.w.readErr("signature", err)
		}
		// The stub may hold the signature as data: take the first
		// occurrence whose header checks out, else the first.
		at = bytes.Index(head, []byte(rarSigPrefix))
		for from := at; from >= 0; {
			if rarStartOK(head[from:]) {
				at = from
				break
			}
			i := bytes.Index(head[from+1:], []byte(rarSigPrefix))
			if i < 0 {
				break
			}
			from += 1 + i
		}
		if at < 0 {
			if bytes.HasPrefix(head, []byte("RE~^")) {
				return 0, 0, &ListError{Format: v.w.format, Reason: "RAR 1.4 archives are not supported", Err: ErrUnsupported}
			}
			return 0, 0, malformed(v.w.format, "RAR signature not found in volume %d", v.index+1)
		}
	}
	rest := head[at:]
	switch {
	case bytes.HasPrefix(rest, []byte(rar5Sig)):
		return start + int64(at+len(rar5Sig)), 5, nil
	case bytes.HasPrefix(rest, []byte(rar4Sig)):
		return start + int64(at+len(rar4Sig)), 4, nil
	case len(rest) < len(rar5Sig):
		return 0, 0, malformed(v.w.format, "truncated signature in volume %d", v.index+1)
	}
	return 0, 0, &ListError{Format: v.w.format, Reason: "unknown RAR version", Err: ErrUnsupported}
}

// readHeader reads n header bytes at pos into v.buf, counting them against
// MaxHeaderBytes. ok is false when the limit stopped the listing.
func (v *rarVolume) readHeader(pos int64, n int) (ok bool, err error) {
	*v.headerBytes += int64(n)
	if *v.headerBytes > v.w.lim.MaxHeaderBytes {
		v.w.listing.Truncated = true
		v.stop = true
		return false, nil
	}
	v.buf = grow(v.buf, n)
	if m, err := v.r.ReadAt(v.buf, pos); m < n {
		if err == nil || err == io.EOF {
			return false, v.truncated(pos)
		}
		return false, v.w.readErr("header", err)
	}
	return true, nil
}

func (v *rarVolume) truncated(pos int64) error {
	return malformed(v.w.format, "truncated at offset %d of volume %d", pos, v.index+1)
}

// list5 walks the blocks of a RAR5 volume from pos (just after the
// signature). more is true when the end block says another volume follows.
func (v *rarVolume) list5(pos int64) (more bool, err error) {
	first := true
	var pre [7]byte
	for {
		if err := v.w.checkCtx(); err != nil {
			return false, err
		}
		n, rerr := v.r.ReadAt(pre[:], pos)
		if n == 0 && pos >= v.size {
			// No end block: old writers stop at the last file. Take it as the end.
			if first {
				return false, v.truncated(pos)
			}
			return false, nil
		}
		if n < 5 {
			if rerr != nil && rerr != io.EOF {
				return false, v.w.readErr("header", rerr)
			}
			return false, v.truncated(pos)
		}
		hsize, vlen := uvarint(pre[4:n])
		if vlen == 0 || hsize == 0 || hsize > rar5MaxBlock {
			return false, malformed(v.w.format, "bad header size at offset %d of volume %d", pos, v.index+1)
		}
		total := 4 + vlen + int(hsize)
		if ok, err := v.readHeader(pos, total); !ok {
			return false, err
		}
		hdr := v.buf[:total]
		if crc32.ChecksumIEEE(hdr[4:]) != le32(hdr) {
			return false, malformed(v.w.format, "header checksum mismatch at offset %d of volume %d", pos, v.index+1)
		}
		b := rarBuf{b: hdr[4+vlen:]}
		typ, flags := b.vint(), b.vint()
		var extraSize, dataSize uint64
		if flags&rar5HasExtra != 0 {
			extraSize = b.vint()
		}
		if flags&rar5HasData != 0 {
			dataSize = b.vint()
		}
		if b.bad || extraSize > uint64(len(b.b)) {
			return false, malformed(v.w.format, "corrupt header at offset %d of volume %d", pos, v.index+1)
		}
		body := rarBuf{b: b.b[:uint64(len(b.b))-extraSize]}
		extra := b.b[uint64(len(b.b))-extraSize:]

		if first && typ != rar5Main && typ != rar5Encryption {
			return false, malformed(v.w.format, "main archive header missing in volume %d", v.index+1)
		}
		first = false
		switch typ {
		case rar5Main:
			arcFlags := body.vint()
			if arcFlags&rar5ArcVolume != 0 {
				v.w.listing.Volume = true
			}
			if arcFlags&rar5ArcVolNum != 0 {
				if num := body.vint(); !body.bad && num != uint64(v.index) {
					return false, malformed(v.w.format, "part %d is volume %d of its archive (parts out of order?)", v.index+1, num+1)
				}
			}
		case rar5File:
			fh, ok := readFile5(body)
			if !ok {
				return false, malformed(v.w.format, "corrupt file header at offset %d of volume %d", pos, v.index+1)
			}
			if err := v.chain(fh.name, flags&rar5DataFromPrev != 0, flags&rar5DataToNext != 0); err != nil {
				return false, err
			}
			if flags&rar5DataFromPrev != 0 {
				break // the rest of a file listed from an earlier volume
			}
			if err := v.addFile5(fh, extra, flags&rar5DataToNext == 0); err != nil {
				return false, err
			}
		case rar5Encryption:
			// Every following header is encrypted: names need the password.
			// At least one follows, a 16-byte IV and a header padded to
			// 16 bytes, or the archive was cut after this one.
			if next := pos + int64(total); v.size-next < 32 {
				return false, v.truncated(next)
			}
			v.w.listing.Encrypted, v.w.listing.HeadersEncrypted = true, true
			v.stop = true
			return false, nil
		case rar5End:
			v.end = pos + int64(total)
			return body.vint()&rar5EndNotLast != 0, nil
		}
		next := pos + int64(total)
		if dataSize > uint64(math.MaxInt64-next) || next+int64(dataSize) > v.size {
			return false, malformed(v.w.format, "truncated data at offset %d of volume %d", next, v.index+1)
		}
		pos = next + int64(dataSize)
	}
}

// rar5FileHeader is what a RAR5 file block's header says of its file.
type rar5FileHeader struct {
	flags   uint64
	unpSize uint64
	crc     uint32
	name    string
}

// readFile5 reads the file header fields of a RAR5 file block's body; ok
// is false when they are corrupt.
func readFile5(body rarBuf) (h rar5FileHeader, ok bool) {
	h.flags = body.vint()
	h.unpSize = body.vint()
	body.vint() // attributes
	if h.flags&rar5FileMtime != 0 {
		body.skip(4)
	}
	if h.flags&rar5FileCRC != 0 && len(body.b) >= 4 {
		h.crc = le32(body.b)
	}
	if h.flags&rar5FileCRC != 0 {
		body.skip(4)
	}
	body.vint() // compression information
	body.vint() // host OS
	nameLen := body.vint()
	if body.bad || nameLen > uint64(len(body.b)) {
		return h, false
	}
	h.name = string(body.b[:nameLen])
	return h, true
}

func (v *rarVolume) addFile5(fh rar5FileHeader, extra []byte, whole bool) error {
	if v.w.full() {
		v.w.listing.Truncated = true
		v.stop = true
		return nil
	}
	size := int64(-1)
	if fh.flags&rar5FileNoSize == 0 && fh.unpSize <= math.MaxInt64 {
		size = int64(fh.unpSize)
	}
	e := v.w.add(fh.name, size, fh.flags&rar5FileDir != 0)
	e.CRC, e.HasCRC = fh.crc, whole && fh.flags&rar5FileCRC != 0 && fh.flags&rar5FileDir == 0

	// Extra area: records of size, type, data.
	for x := (rarBuf{b: extra}); len(x.b) > 0 && !x.bad; {
		n := x.vint()
		if x.bad || n > uint64(len(x.b)) {
			break
		}
		rec := rarBuf{b: x.b[:n]}
		x.b = x.b[n:]
		switch rec.vint() {
		case rar5ExtraCrypt:
			e.Encrypted, v.w.listing.Encrypted = true, true
		case rar5ExtraRedirect:
			kind := rec.vint()
			rec.vint() // flags
			tlen := rec.vint()
			if !rec.bad && tlen <= uint64(len(rec.b)) && kind >= 1 && kind <= 4 {
				// Unix and Windows symlinks and junctions resolve from the
				// link's directory; a hard link (4) names an entry from the root.
				if target := string(rec.b[:tlen]); kind == 4 {
					if escapesRoot(target) {
						e.Unsafe, e.LinkEscape = true, true
					}
				} else {
					v.w.link(e, target)
				}
			}
		}
	}
	return nil
}

// list4 walks the blocks of a RAR 1.5-4.x volume from pos (just after the
// signature). more is true when the end block says another volume follows.
func (v *rarVolume) list4(pos int64) (more bool, err error) {
	first := true
	var pre [7]byte
	for {
		if err := v.w.checkCtx(); err != nil {
			return false, err
		}
		n, rerr := v.r.ReadAt(pre[:], pos)
		if n == 0 && pos >= v.size {
			if first {
				return false, v.truncated(pos)
			}
			return false, nil // archives from old writers end without an end block
		}
		if n < 7 {
			if rerr != nil && rerr != io.EOF {
				return false, v.w.readErr("header", rerr)
			}
			return false, v.truncated(pos)
		}
		typ, flags, hsize := pre[2], le16(pre[3:]), int(le16(pre[5:]))
		if typ == rar4Main && flags&rar4MainComment != 0 {
			hsize = 13 // the archive comment follows as a block of its own
		}
		if hsize < 7 {
			return false, malformed(v.w.format, "bad header size at offset %d of volume %d", pos, v.index+1)
		}
		if ok, err := v.readHeader(pos, hsize); !ok {
			return false, err
		}
		hdr := v.buf[:hsize]
		if rar4CheckedCRC(typ) && uint16(crc32.ChecksumIEEE(hdr[2:])) != le16(hdr) {
			return false, malformed(v.w.format, "header checksum mismatch at offset %d of volume %d", pos, v.index+1)
		}
		if first && typ != rar4Main {
			return false, malformed(v.w.format, "main archive header missing in volume %d", v.index+1)
		}
		first = false

		var dataSize uint64
		if flags&rar4LongBlock != 0 {
			if hsize < 11 {
				return false, malformed(v.w.format, "bad header size at offset %d of volume %d", pos, v.index+1)
			}
			dataSize = uint64(le32(hdr[7:]))
		}
		switch typ {
		case rar4Main:
			if flags&rar4MainVolume != 0 {
				v.w.listing.Volume = true
			}
			if flags&rar4MainPassword != 0 {
				v.w.listing.Encrypted, v.w.listing.HeadersEncrypted = true, true
				v.stop = true
				return false, nil
			}
		case rar4File, rar4Service:
			if hsize < rar4FileFixedLen {
				return false, malformed(v.w.format, "corrupt file header at offset %d of volume %d", pos, v.index+1)
			}
			if flags&rar4LargeFile != 0 {
				if hsize < rar4FileFixedLen+8 {
					return false, malformed(v.w.format, "corrupt file header at offset %d of volume %d", pos, v.index+1)
				}
				dataSize |= uint64(le32(hdr[rar4FileFixedLen:])) << 32
			}
			if typ != rar4File {
				break
			}
			raw, unp, ok := readFile4(hdr, flags)
			if !ok {
				return false, malformed(v.w.format, "corrupt file header at offset %d of volume %d", pos, v.index+1)
			}
			if err := v.chain(string(raw), flags&rar4SplitBefore != 0, flags&rar4SplitAfter != 0); err != nil {
				return false, err
			}
			if flags&rar4SplitBefore == 0 {
				if err := v.addFile4(hdr, raw, unp, flags); err != nil || v.stop {
					return false, err
				}
			}
		case rar4End:
			v.end = pos + int64(hsize)
			return flags&rar4EndNextVol != 0, nil
		}
		next := pos + int64(hsize)
		if dataSize > uint64(math.MaxInt64-next) || next+int64(dataSize) > v.size {
			return false, malformed(v.w.format, "truncated data at offset %d of volume %d", next, v.index+1)
		}
		pos = next + int64(dataSize)
	}
}

// rar4CheckedCRC reports whether a RAR4 block's CRC covers its whole header;
// comment, authenticity and old service blocks compute it differently.
func rar4CheckedCRC(typ byte) bool {
	switch typ {
	case rar4Comment, rar4AV, rar4OldService, rar4Sign:
		return false
	}
	return true
}

// readFile4 reads the stored name and the unpacked size of a RAR4 file
// block's header hdr; ok is false when the name does not fit in it.
func readFile4(hdr []byte, flags uint16) (raw []byte, unp uint64, ok bool) {
	unp = uint64(le32(hdr[11:]))
	nameLen := int(le16(hdr[26:]))
	off := rar4FileFixedLen
	if flags&rar4LargeFile != 0 {
		unp |= uint64(le32(hdr[off+4:])) << 32
		off += 8
	}
	if off+nameLen > len(hdr) {
		return nil, 0, false
	}
	return hdr[off : off+nameLen], unp, true
}

func (v *rarVolume) addFile4(hdr, raw []byte, unp uint64, flags uint16) error {
	if v.w.full() {
		v.w.listing.Truncated = true
		v.stop = true
		return nil
	}
	unknown := unp == math.MaxUint32
	if flags&rar4LargeFile != 0 {
		unknown = unp == math.MaxUint64
	}
	name := string(raw)
	if flags&rar4Unicode != 0 {
		name = decodeRar4Name(raw)
	}
	// RAR 4.x stores '\' as the directory separator.
	name = strings.ReplaceAll(name, `\`, "/")
	size := int64(-1)
	if !unknown && unp <= math.MaxInt64 {
		size = int64(unp)
	}
	e := v.w.add(name, size, flags&rar4DirMask == rar4DirMask)
	e.CRC, e.HasCRC = le32(hdr[16:]), flags&rar4DirMask != rar4DirMask && flags&rar4SplitAfter == 0
	if flags&rar4Encrypted != 0 {
		e.Encrypted, v.w.listing.Encrypted = true, true
	}
	return nil
}

// decodeRar4Name decodes a RAR 3.x "unicode" file name: an OEM name, a zero
// byte, then UTF-16 compressed against the OEM bytes. Without the zero byte
// the name is plain UTF-8.
func decodeRar4Name(buf []byte) string {
	oem, enc, ok := bytes.Cut(buf, []byte{0})
	if !ok {
		return string(buf)
	}
	if len(enc) < 2 {
		return string(oem)
	}
	high := uint16(enc[0]) << 8
	flags, enc := enc[1], enc[2:]
	flagBits := 8
	out := make([]uint16, 0, len(oem))
	for len(out) < len(oem) && len(enc) > 0 {
		if flagBits == 0 {
			flags, enc = enc[0], enc[1:]
			flagBits = 8
			if len(enc) == 0 {
				break
			}
		}
		switch flags >> 6 {
		case 0:
			out = append(out, uint16(enc[0]))
			enc = enc[1:]
		case 1:
			out = append(out, uint16(enc[0])|high)
			enc = enc[1:]
		case 2:
			if len(enc) < 2 {
				enc = nil
				break
			}
			out = append(out, le16(enc))
			enc = enc[2:]
		case 3:
			n := enc[0]
			enc = enc[1:]
			src := oem[len(out):]
			if l := int(n&0x7f) + 2; l < len(src) {
				src = src[:l]
			}
			if n&0x80 != 0 {
				if len(enc) == 0 {
					break
				}
				corr := enc[0]
				enc = enc[1:]
				for _, c := range src {
					out = append(out, uint16(c+corr)|high)
				}
			} else {
				for _, c := range src {
					out = append(out, uint16(c))
				}
			}
		}
		flags <<= 2
		flagBits -= 2
	}
	return string(utf16.Decode(out))
}

// rarBuf reads RAR5 header fields; a read past the end sets bad instead of panicking.
type rarBuf struct {
	b   []byte
	bad bool
}

func (r *rarBuf) vint() uint64 {
	v, n := uvarint(r.b)
	if n == 0 {
		r.bad = true
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rarBuf) skip(n int) {
	if n > len(r.b) {
		r.bad = true
		r.b = nil
		return
	}
	r.b = r.b[n:]
}

// uvarint decodes a RAR5 vint (7 bits per byte, low first, at most 10
// bytes). n is 0 when b holds no complete vint.
func uvarint(b []byte) (v uint64, n int) {
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}
