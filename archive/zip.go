package archive

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strconv"
	"strings"
)

// The zip walker reads the central directory itself, as a stream, instead
// of using archive/zip: archive/zip allocates the whole directory up front
// (a hostile end record can claim millions of entries), cannot stop after
// MaxEntries, and does not look at a context. Offsets and record layouts
// follow PKWARE's APPNOTE.TXT 6.3.

const (
	zipLocalSig     = 0x04034b50
	zipCentralSig   = 0x02014b50
	zipEndSig       = 0x06054b50
	zip64LocatorSig = 0x07064b50
	zip64EndSig     = 0x06064b50
	zipDigitalSig   = 0x05054b50
	zipSpanSig      = 0x08074b50 // first bytes of a split set's first part; also the data descriptor signature
	zipSpanTempSig  = 0x30304b50 // "PK00": a split set that turned out to need one part

	zipEndLen        = 22
	zip64LocatorLen  = 20
	zip64EndLen      = 56
	zipCentralLen    = 46
	zipLocalLen      = 30
	zipMaxCommentLen = 0xffff

	zipExtraZip64       = 0x0001
	zipExtraUnicodePath = 0x7075

	zipFlagEncrypted  = 0x1
	zipFlagDescriptor = 0x8
)

var errNoZipEnd = errors.New("no end of central directory record")

// zipEnd is the end of central directory, merged from the classic record
// and the zip64 one when present.
type zipEnd struct {
	limit    int64 // offset of the first end record: the directory ends at or before it
	disk     uint32
	cdDisk   uint32
	entries  uint64
	cdSize   uint64
	cdOffset uint64
}

func listZip(w *walk, src *partSet) error {
	end, err := findZipEnd(w, src)
	if errors.Is(err, errNoZipEnd) {
		return scanZipLocal(w, src)
	}
	if err != nil {
		return err
	}

	// Where offsets point: a single zip and a byte split (x.zip.001 …) use
	// offsets into the whole concatenation; a zip split set (x.z01 … x.zip)
	// numbers its parts as disks and offsets are relative to their disk.
	nparts := src.Len()
	var base int64
	switch {
	case end.disk == 0 && end.cdDisk == 0:
	case nparts == 1:
		return volumeMissing(w.format, "last part of a split set (disk %d); the earlier parts are missing", uint64(end.disk)+1)
	case uint64(end.disk) == uint64(nparts-1) && end.cdDisk <= end.disk:
		base = src.Start(int(end.cdDisk))
	default:
		return volumeMissing(w.format, "split set of %d disks but %d parts given", uint64(end.disk)+1, nparts)
	}

	if end.cdOffset > uint64(end.limit) || base+int64(end.cdOffset) > end.limit {
		return malformed(w.format, "central directory offset %d beyond the end record", end.cdOffset)
	}
	start := base + int64(end.cdOffset)
	if end.entries == 0 && end.cdSize == 0 {
		return nil // an empty zip
	}
	if !zipSigAt(src, start, zipCentralSig) {
		// archive/zip's tolerance: data prepended to the archive (a
		// self-extractor stub) shifts every offset; the directory still ends
		// right before the end record.
		alt := end.limit - int64(min(end.cdSize, uint64(end.limit)))
		if base != 0 || !zipSigAt(src, alt, zipCentralSig) {
			return malformed(w.format, "central directory not found at offset %d", start)
		}
		start = alt
	}

	// Local headers are found at their recorded offsets, shifted like the
	// directory when a stub precedes the archive, on their own disk in a
	// zip split set; their data must end before the directory.
	loc := zipLocals{base: base + start - (base + int64(end.cdOffset)), dirStart: start, split: end.disk != 0}
	size := end.cdSize
	cut := false // the directory runs past the end record: the file was damaged
	if avail := uint64(end.limit - start); size > avail {
		size, cut = avail, true
	}
	byteLimited := size > uint64(w.lim.MaxHeaderBytes)
	// Room for the entries the directory's bytes can hold, not the count
	// its end record claims.
	hint := int(min(end.entries, uint64(w.lim.MaxEntries), size/zipCentralLen))
	w.zipSpans = make([]zipSpan, 0, hint)
	w.zipNames = make(map[string]bool, hint)
	readLen := int64(min(size, uint64(w.lim.MaxHeaderBytes)))
	br := openDirReader(io.NewSectionReader(src, start, readLen))
	defer closeDirReader(br)

	var hdr [zipCentralLen]byte
	var nameBuf, extraBuf []byte
	var count uint64
	for {
		if err := w.checkCtx(); err != nil {
			return err
		}
		if w.full() {
			if _, err := br.Peek(1); err == nil || count < end.entries || byteLimited {
				w.listing.Truncated = true
			}
			if src.Len() > 1 { // only zipOneArchive reads them
				if err := w.zipRestOffsets(br, loc); err != nil {
					return err
				}
			}
			return w.zipOneArchive(src, loc)
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) && !byteLimited {
				break // read the whole directory
			}
			return w.zipDirCut(src, loc, err, byteLimited, count, end.entries)
		}
		sig := le32(hdr[0:])
		if sig != zipCentralSig {
			if count > 0 && (sig == zipDigitalSig || sig == zip64EndSig) {
				break
			}
			return malformed(w.format, "bad central directory entry %d", count+1)
		}
		nameLen, extraLen, commentLen := int(le16(hdr[28:])), int(le16(hdr[30:])), int64(le16(hdr[32:]))
		nameBuf = grow(nameBuf, nameLen)
		extraBuf = grow(extraBuf, extraLen)
		if _, err := io.ReadFull(br, nameBuf); err != nil {
			return w.zipDirCut(src, loc, err, byteLimited, count, end.entries)
		}
		if _, err := io.ReadFull(br, extraBuf); err != nil {
			return w.zipDirCut(src, loc, err, byteLimited, count, end.entries)
		}
		if _, err := br.Discard(int(commentLen)); err != nil {
			return w.zipDirCut(src, loc, err, byteLimited, count, end.entries)
		}
		w.addZipCentral(hdr[:], nameBuf, extraBuf)
		if err := w.checkZipLocal(src, loc, hdr[:], nameBuf, extraBuf, count); err != nil {
			return err
		}
		count++
	}
	if cut {
		return malformed(w.format, "truncated central directory (%d of %d entries)", count, end.entries)
	}
	// Writers that overflow the 16-bit count without zip64 store it modulo
	// 65536; archive/zip accepts that, and so do we.
	if count != end.entries && uint16(count) != uint16(end.entries) {
		return malformed(w.format, "central directory holds %d entries, end record claims %d", count, end.entries)
	}
	return w.zipOneArchive(src, loc)
}

// zipDirCut is zipDirEnd for a directory whose read stopped early; a
// listing it lets stand (cut by MaxHeaderBytes) is judged by zipOneArchive
// on the entries seen.
func (w *walk) zipDirCut(src *partSet, loc zipLocals, err error, byteLimited bool, count, entries uint64) error {
	if err := w.zipDirEnd(err, byteLimited, count, entries); err != nil {
		return err
	}
	return w.zipOneArchive(src, loc)
}

// zipOneArchive refuses a byte split whose archive starts after its first
// part (its first local header there, whatever its offsets say: shifted
// by a stub, or adjusted by zip -A) when that part is an archive of its
// own: another archive, or a volume of another set, named as a part of
// this one. A self-extractor's stub, which is no archive, may be longer
// than a part.
func (w *walk) zipOneArchive(src *partSet, loc zipLocals) error {
	if src.Len() < 2 || loc.split || w.zipFirst < src.Start(1) || sniffParts(src).Format == FormatNone {
		return nil
	}
	return notOneArchive(w.format, "the archive starts in part %d of %d: the parts before it hold none of it", src.PartAt(w.zipFirst)+1, src.Len())
}

// zipRestOffsets lowers zipFirst with the local header offsets of the
// directory entries left unlisted (MaxEntries), within the bytes read and
// the listing's time bound (the bound's error, when it ends the walk).
func (w *walk) zipRestOffsets(br *bufio.Reader, loc zipLocals) error {
	if loc.split {
		return nil
	}
	var hdr [zipCentralLen]byte
	var extra []byte
	for {
		if err := w.checkCtx(); err != nil {
			return err
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil || le32(hdr[:]) != zipCentralSig {
			return nil
		}
		nameLen, extraLen, commentLen := int(le16(hdr[28:])), int(le16(hdr[30:])), int(le16(hdr[32:]))
		if _, err := br.Discard(nameLen); err != nil {
			return nil
		}
		extra = grow(extra, extraLen)
		if _, err := io.ReadFull(br, extra); err != nil {
			return nil
		}
		if _, err := br.Discard(commentLen); err != nil {
			return nil
		}
		_, _, offset := zipSizes(hdr[:], extra)
		if offset <= uint64(loc.dirStart) {
			if pos := loc.base + int64(offset); w.zipFirst < 0 || pos < w.zipFirst {
				w.zipFirst = pos
			}
		}
	}
}

// zipSizes returns the uncompressed and compressed sizes and the local
// header offset the central directory entry hdr records, with its extra
// block's zip64 values in place of those that overflowed.
func zipSizes(hdr, extra []byte) (usize, csize, offset uint64) {
	usize, csize, offset = uint64(le32(hdr[24:])), uint64(le32(hdr[20:])), uint64(le32(hdr[42:]))
	forEachExtra(extra, func(id uint16, data []byte) {
		if id != zipExtraZip64 {
			return
		}
		// The zip64 fields are present only for the values that overflowed, in this order.
		for _, v := range []*uint64{&usize, &csize, &offset} {
			if *v == math.MaxUint32 && len(data) >= 8 {
				*v, data = binary.LittleEndian.Uint64(data), data[8:]
			}
		}
	})
	return usize, csize, offset
}

// zipLocals says where an archive's local headers are.
type zipLocals struct {
	base     int64 // added to a recorded offset in a single archive or byte split
	dirStart int64 // the central directory's offset: entry data ends before it
	split    bool  // a zip split set: offsets count from the entry's disk
}

// checkZipLocal verifies the local header of the central directory entry
// hdr (its name and extra block given): it must be where the directory
// says, its data must end before the directory, and its data must have the
// CRC-32 the directory records (checkZipCRC, within its budget). A local header that
// disagrees with the directory (another name, method, size, CRC-32 or
// encryption flag) is a lie two extractors may read two ways: Suspicious,
// not fatal.
func (w *walk) checkZipLocal(src *partSet, loc zipLocals, hdr, name, extra []byte, index uint64) error {
	usize, csize, offset := zipSizes(hdr, extra)
	pos, limit := loc.base, loc.dirStart
	if loc.split {
		disk := int(le16(hdr[34:]))
		if disk >= src.Len() {
			return malformed(w.format, "entry %d (%s) on disk %d of %d", index+1, quoteName(name), disk+1, src.Len())
		}
		pos, limit = src.Start(disk), src.Size()
	}
	if offset > uint64(limit) {
		return malformed(w.format, "entry %d (%s): local header offset %d beyond the central directory", index+1, quoteName(name), offset)
	}
	pos += int64(offset)
	if !loc.split && (w.zipFirst < 0 || pos < w.zipFirst) {
		w.zipFirst = pos
	}
	w.zipSpans = append(w.zipSpans, zipSpan{start: pos})
	// One read for the header and a name of the directory's length.
	w.zipBuf = grow(w.zipBuf, zipLocalLen+len(name))
	n, _ := src.ReadAt(w.zipBuf, pos)
	lh := w.zipBuf[:n]
	if n < zipLocalLen || le32(lh) != zipLocalSig {
		return malformed(w.format, "entry %d (%s): no local header at offset %d", index+1, quoteName(name), pos)
	}
	lnameLen, lextraLen := int(le16(lh[26:])), int(le16(lh[28:]))
	dataStart := pos + zipLocalLen + int64(lnameLen) + int64(lextraLen)
	if csize > math.MaxInt64/2 || dataStart+int64(csize) > limit {
		return malformed(w.format, "entry %d (%s): data runs past the central directory", index+1, quoteName(name))
	}
	w.zipSpans[len(w.zipSpans)-1].end = dataStart + int64(csize)
	lname := lh[zipLocalLen:]
	if lnameLen != len(name) {
		lname = nil
	}
	// Sizes and CRC-32 follow the data when a descriptor is flagged; a
	// zip64 header's sizes are in its extra block.
	lflags, lcsize, lusize := le16(lh[6:]), uint64(le32(lh[18:])), uint64(le32(lh[22:]))
	first := lflags&zipFlagDescriptor == 0
	sizeDiffers := first && (lcsize != math.MaxUint32 && lcsize != csize || lusize != math.MaxUint32 && lusize != usize)
	crcDiffers := first && le32(lh[14:]) != le32(hdr[16:])
	encDiffers := (lflags^le16(hdr[8:]))&zipFlagEncrypted != 0
	if !bytes.Equal(lname, name) || sizeDiffers || crcDiffers || encDiffers || le16(lh[8:]) != le16(hdr[10:]) {
		w.zipDisagree++
		if w.zipDisagree == 1 {
			w.suspect(fmt.Sprintf("the central directory disagrees with the local header of %s", quoteName(name)))
		}
	}
	checked, err := w.checkZipCRC(src, hdr, name, index, dataStart, csize, usize)
	if checked && len(w.listing.Entries) > 0 {
		w.listing.Entries[len(w.listing.Entries)-1].CRCChecked = true
	}
	return err
}

// quoteName shows a stored name in an error, escaped and cut.
func quoteName(name []byte) string { return strconv.Quote(cutUTF8(string(name), 80)) }

// zipDirEnd decides what a short read inside the directory means: the
// MaxHeaderBytes bound (Truncated listing) or a damaged archive.
func (w *walk) zipDirEnd(err error, byteLimited bool, count, claimed uint64) error {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return w.readErr("central directory", err)
	}
	if byteLimited {
		w.listing.Truncated = true
		return nil
	}
	return malformed(w.format, "truncated central directory (%d of %d entries)", count, claimed)
}

// addZipCentral records the entry of one central directory header.
func (w *walk) addZipCentral(hdr, name, extra []byte) {
	flags := le16(hdr[8:])
	usize := uint64(le32(hdr[24:]))
	madeBy := hdr[5] // host system, the high byte of "version made by"
	extAttr := le32(hdr[38:])

	rawName := string(name)
	forEachExtra(extra, func(id uint16, data []byte) {
		switch id {
		case zipExtraZip64:
			if usize == math.MaxUint32 && len(data) >= 8 {
				usize = binary.LittleEndian.Uint64(data)
			}
		case zipExtraUnicodePath:
			// Info-ZIP Unicode Path: version 1, CRC-32 of the header name, UTF-8 name.
			if len(data) >= 5 && data[0] == 1 && le32(data[1:]) == crc32.ChecksumIEEE(name) {
				rawName = string(data[5:])
			}
		}
	})

	dir := strings.HasSuffix(rawName, "/") || strings.HasSuffix(rawName, `\`)
	switch madeBy {
	case 3, 19: // Unix, OS X: st_mode in the high 16 bits
		dir = dir || (extAttr>>16)&0xf000 == 0x4000
	case 0, 10, 11, 14: // MS-DOS, NTFS, VFAT, VFAT: the DOS directory attribute
		dir = dir || extAttr&0x10 != 0
	}
	size := int64(-1)
	if usize <= math.MaxInt64 {
		size = int64(usize)
	}
	e := w.add(rawName, size, dir)
	e.CRC, e.HasCRC = le32(hdr[16:]), !dir
	// Two entries under one name are extracted as either, the first or
	// the last, as the extractor chooses. Names are told apart by their
	// stored bytes (Raw, kept whole, when the Path is cleaned or cut: two
	// names in a DOS code page clean alike, yet are two files).
	key := cmp.Or(e.Raw, e.Path)
	if w.zipNames[key] && !w.zipDuplicate {
		w.zipDuplicate = true // the first one is named
		w.suspect(fmt.Sprintf("more than one entry named %s", quoteName([]byte(key))))
	}
	w.zipNames[key] = true
	if flags&zipFlagEncrypted != 0 {
		e.Encrypted, w.listing.Encrypted = true, true
	}
}

// findZipEnd locates the end of central directory in the last 64 KiB of the
// concatenated parts (it is always in the last part).
func findZipEnd(w *walk, src *partSet) (zipEnd, error) {
	size := src.Size()
	if size < zipEndLen {
		return zipEnd{}, errNoZipEnd
	}
	tail := min(size, zipEndLen+zipMaxCommentLen)
	buf := make([]byte, tail)
	if _, err := src.ReadAt(buf, size-tail); err != nil && !errors.Is(err, io.EOF) {
		return zipEnd{}, w.readErr("end of central directory", err)
	}
	at, hidden := pickZipEnd(src, size-tail, buf)
	if at < 0 {
		return zipEnd{}, errNoZipEnd
	}
	if hidden {
		w.suspect("a second end of central directory record hidden in the archive comment")
	}
	rec := buf[at:]
	end := zipEnd{
		limit:    size - tail + int64(at),
		disk:     uint32(le16(rec[4:])),
		cdDisk:   uint32(le16(rec[6:])),
		entries:  uint64(le16(rec[10:])),
		cdSize:   uint64(le32(rec[12:])),
		cdOffset: uint64(le32(rec[16:])),
	}

	// A zip64 locator sits right before the classic record.
	locPos := end.limit - zip64LocatorLen
	if locPos < 0 {
		return end, nil
	}
	var loc [zip64LocatorLen]byte
	if _, err := src.ReadAt(loc[:], locPos); err != nil || le32(loc[:]) != zip64LocatorSig {
		return end, nil
	}
	locDisk, locOff, disks := le32(loc[4:]), binary.LittleEndian.Uint64(loc[8:]), le32(loc[16:])
	var z [zip64EndLen]byte
	pos := int64(-1)
	if locOff < uint64(locPos) {
		pos = int64(locOff)
		if disks > 1 && int(disks) == src.Len() && int(locDisk) < src.Len() {
			pos += src.Start(int(locDisk))
		}
	}
	if pos < 0 || pos+zip64EndLen > locPos || !zipSigAt(src, pos, zip64EndSig) {
		// Offsets shifted by prepended data: the record normally sits right before the locator.
		pos = locPos - zip64EndLen
		if pos < 0 || !zipSigAt(src, pos, zip64EndSig) {
			return zipEnd{}, malformed(w.format, "zip64 end of central directory not found")
		}
	}
	if _, err := src.ReadAt(z[:], pos); err != nil {
		return zipEnd{}, w.readErr("zip64 end of central directory", err)
	}
	return zipEnd{
		limit:    pos,
		disk:     le32(z[16:]),
		cdDisk:   le32(z[20:]),
		entries:  binary.LittleEndian.Uint64(z[32:]),
		cdSize:   binary.LittleEndian.Uint64(z[40:]),
		cdOffset: binary.LittleEndian.Uint64(z[48:]),
	}, nil
}

// pickZipEnd chooses the end record among the candidates in buf (the
// file's tail, read from offset tailAt). A writer ends the file with the
// record and its comment; a record whose comment runs exactly to the end
// is preferred over one that stops short. When the comment of such a
// record holds another record, two readers can see two archives (one
// scanning back for the last signature, one checking the comment): the
// outer record wins when its central directory is where it says, and
// hidden reports the lie.
func pickZipEnd(src io.ReaderAt, tailAt int64, buf []byte) (at int, hidden bool) {
	at = -1
	exact := false
	var cands []int // every record that fits in the tail, last first
	for j := len(buf) - zipEndLen; j >= 0; j-- {
		if le32(buf[j:]) != zipEndSig {
			continue
		}
		end := j + zipEndLen + int(le16(buf[j+20:]))
		if end > len(buf) {
			continue
		}
		cands = append(cands, j)
		switch {
		case end == len(buf) && (!exact || zipDirAt(src, tailAt, buf[j:])):
			at, exact = j, true
		case at < 0:
			at = j // a record followed by junk: taken when nothing better turns up
		}
	}
	for _, j := range cands {
		hidden = hidden || j > at
	}
	return at, hidden
}

// zipDirAt reports whether the central directory the end record rec
// names starts where it says (or right before the record, for a
// self-extractor whose offsets do not count its stub).
func zipDirAt(src io.ReaderAt, tailAt int64, rec []byte) bool {
	cdSize, cdOffset := int64(le32(rec[12:])), int64(le32(rec[16:]))
	if le16(rec[10:]) == 0 && cdSize == 0 {
		return true
	}
	return zipSigAt(src, cdOffset, zipCentralSig) || zipSigAt(src, tailAt-cdSize, zipCentralSig)
}

// scanZipLocal lists a zip whose end records are gone (a download cut
// short) from its local file headers, front to back, as far as they can be
// followed. It always returns an error: the archive is damaged.
func scanZipLocal(w *walk, src *partSet) error {
	var pos, headerBytes int64
	var sig [4]byte
	if _, err := src.ReadAt(sig[:], 0); err == nil {
		if s := le32(sig[:]); s == zipSpanSig || s == zipSpanTempSig {
			pos = 4
		}
	}
	var hdr [zipLocalLen]byte
	var buf []byte
	for {
		if err := w.checkCtx(); err != nil {
			return err
		}
		if n, _ := src.ReadAt(hdr[:], pos); n < zipLocalLen || le32(hdr[:]) != zipLocalSig {
			break
		}
		if w.full() || headerBytes > w.lim.MaxHeaderBytes {
			w.listing.Truncated = true
			break
		}
		flags := le16(hdr[6:])
		csize, usize := uint64(le32(hdr[18:])), uint64(le32(hdr[22:]))
		nameLen, extraLen := int(le16(hdr[26:])), int(le16(hdr[28:]))
		buf = grow(buf, nameLen+extraLen)
		if _, err := src.ReadAt(buf, pos+zipLocalLen); err != nil {
			break
		}
		name, extra := buf[:nameLen], buf[nameLen:]
		forEachExtra(extra, func(id uint16, data []byte) {
			// In a local header the zip64 extra holds both sizes, uncompressed first.
			if id == zipExtraZip64 && len(data) >= 16 {
				usize, csize = binary.LittleEndian.Uint64(data), binary.LittleEndian.Uint64(data[8:])
			}
		})
		dataStart := pos + int64(zipLocalLen+nameLen+extraLen)
		headerBytes += int64(zipLocalLen + nameLen + extraLen)
		size := int64(-1)
		if usize <= math.MaxInt64 {
			size = int64(usize)
		}
		// Without sizes in the header they follow the data, in a data
		// descriptor: find the next header and read them from the
		// descriptor right before it.
		next := int64(-1)
		if flags&zipFlagDescriptor != 0 && csize == 0 {
			var ok bool
			var err error
			if next, ok, err = nextZipHeader(w, src, dataStart); err != nil {
				return err
			}
			size = -1
			if !ok {
				next = -1
			} else if c, u := int64(zipUint32At(src, next-8)), zipUint32At(src, next-4); dataStart+c == next-12 || dataStart+c == next-16 {
				size = int64(u)
			}
		}
		e := w.add(string(name), size, strings.HasSuffix(string(name), "/"))
		if flags&zipFlagEncrypted != 0 {
			e.Encrypted, w.listing.Encrypted = true, true
		}
		if flags&zipFlagDescriptor != 0 && csize == 0 {
			if next < 0 {
				break // the data runs to the end of what is left
			}
			pos = next
			continue
		}
		if csize > math.MaxInt64/2 {
			break
		}
		pos = dataStart + int64(csize)
		if flags&zipFlagDescriptor != 0 {
			pos += 12 // crc, sizes
			if zipSigAt(src, pos-12, zipSpanSig) {
				pos += 4
			}
		}
	}
	if len(w.listing.Entries) == 0 {
		return cutShort(w.format, "end of central directory record not found")
	}
	return cutShort(w.format, "end of central directory record not found (listed %d entries from local headers)", len(w.listing.Entries))
}

// nextZipHeader scans forward from off for the next local header and
// returns its offset; ok is false when the data runs to the end of the
// file (or into the central directory). It reads in steps growing from
// 4 KiB to 64 KiB into the walk's buffer: a salvage scan costs time in
// proportion to the file but no memory, and an entry of a few bytes
// costs a read of a few KiB.
func nextZipHeader(w *walk, src *partSet, off int64) (next int64, ok bool, err error) {
	if cap(w.zipScan) == 0 {
		w.zipScan = make([]byte, 64<<10)
	}
	step := 4 << 10
	for off < src.Size() {
		if err := w.ctxErr(); err != nil {
			return 0, false, err
		}
		buf := w.zipScan[:step]
		step = min(2*step, cap(w.zipScan))
		n, _ := src.ReadAt(buf, off)
		if n < 4 {
			return 0, false, nil
		}
		chunk := buf[:n]
		if i := bytes.Index(chunk, []byte("PK\x03\x04")); i >= 0 {
			return off + int64(i), true, nil
		}
		if bytes.Contains(chunk, []byte("PK\x01\x02")) {
			return 0, false, nil
		}
		off += int64(n - 3) // the next read overlaps by 3 bytes, for a signature across the boundary
	}
	return 0, false, nil
}

func zipUint32At(r io.ReaderAt, off int64) uint32 {
	var b [4]byte
	if off < 0 {
		return 0
	}
	if n, _ := r.ReadAt(b[:], off); n < 4 {
		return 0
	}
	return le32(b[:])
}

// forEachExtra calls fn for each well-formed field of a zip extra block.
func forEachExtra(extra []byte, fn func(id uint16, data []byte)) {
	for len(extra) >= 4 {
		id, n := le16(extra), int(le16(extra[2:]))
		extra = extra[4:]
		if n > len(extra) {
			return
		}
		fn(id, extra[:n])
		extra = extra[n:]
	}
}

func zipSigAt(r io.ReaderAt, off int64, sig uint32) bool {
	if off < 0 {
		return false
	}
	var b [4]byte
	n, _ := r.ReadAt(b[:], off)
	return n == 4 && le32(b[:]) == sig
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// grow returns b resized to n bytes, reusing its storage when it can.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
