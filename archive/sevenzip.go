package archive

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// The 7z walker parses the header itself. bodgit/sevenzip allocates from
// counts in the header before it reads the items (make([]FileHeader, n)
// with n up to 2^32), which a hostile header turns into an out-of-memory
// crash that recover cannot catch. Here nothing is allocated from a count:
// the header is read once into memory (at most MaxHeaderBytes, checked
// against the start header before reading) and walked with cursors. The
// layout follows 7-Zip's DOC/7zFormat.txt; tests cross-check the result with
// bodgit/sevenzip and, when installed, the 7z command.

const (
	sz7Header            = 0x01
	sz7ArchiveProperties = 0x02
	sz7AdditionalStreams = 0x03
	sz7MainStreams       = 0x04
	sz7FilesInfo         = 0x05
	sz7PackInfo          = 0x06
	sz7UnpackInfo        = 0x07
	sz7SubStreamsInfo    = 0x08
	sz7Size              = 0x09
	sz7CRC               = 0x0a
	sz7FolderID          = 0x0b
	sz7CodersUnpackSize  = 0x0c
	sz7NumUnpackStream   = 0x0d
	sz7EmptyStream       = 0x0e
	sz7EmptyFile         = 0x0f
	sz7Name              = 0x11
	sz7WinAttributes     = 0x15
	sz7EncodedHeader     = 0x17
	sz7End               = 0x00

	sz7SignatureLen = 32
	sz7MaxCoderIO   = 64 // 7-Zip's own bound on coders and streams per folder
	sz7MaxNesting   = 4  // encoded headers inside encoded headers
	sz7AttrDir      = 0x10
)

// The signature and the coder method ids the walker knows.
const (
	sz7Signature   = "7z\xbc\xaf\x27\x1c"
	sz7MethodCopy  = "\x00"
	sz7MethodLZMA  = "\x03\x01\x01"
	sz7MethodLZMA2 = "\x21"
	sz7MethodAES   = "\x06\xf1\x07\x01"
)

func list7z(w *walk, src *partSet) error {
	var sh [sz7SignatureLen]byte
	if n, err := src.ReadAt(sh[:], 0); n < len(sh) {
		if n >= len(sz7Signature) && string(sh[:len(sz7Signature)]) != sz7Signature {
			return malformed(w.format, "7z signature not found")
		}
		if err != nil && err != io.EOF {
			return w.readErr("signature header", err)
		}
		return malformed(w.format, "truncated signature header")
	}
	if string(sh[:len(sz7Signature)]) != sz7Signature {
		return malformed(w.format, "7z signature not found")
	}
	if sh[6] != 0 {
		return &ListError{Format: w.format, Reason: fmt.Sprintf("7z format version %d.%d not supported", sh[6], sh[7]), Err: ErrUnsupported}
	}
	if crc32.ChecksumIEEE(sh[12:]) != le32(sh[8:]) {
		return malformed(w.format, "start header checksum mismatch")
	}
	nextOff, nextSize, nextCRC := binary.LittleEndian.Uint64(sh[12:]), binary.LittleEndian.Uint64(sh[20:]), le32(sh[28:])
	if nextSize == 0 {
		// 7-Zip writes an empty archive as a bare start header, all
		// zeros, and refuses one whose offset or CRC is not: a 7z with
		// files whose size field alone was zeroed is no empty archive.
		if nextOff != 0 || nextCRC != 0 {
			return malformed(w.format, "start header names no header but an offset %d and a checksum %08x", nextOff, nextCRC)
		}
		return w.sz7End(src, sz7SignatureLen)
	}
	if nextSize > uint64(w.lim.MaxHeaderBytes) {
		return &ListError{Format: w.format, Reason: fmt.Sprintf("header larger than limit (%d > %d bytes)", nextSize, w.lim.MaxHeaderBytes), Err: ErrLimit}
	}
	avail := uint64(src.Size() - sz7SignatureLen)
	if nextOff > avail || nextSize > avail-nextOff {
		return volumeMissing(w.format, "header beyond end of file: truncated archive or missing volumes")
	}
	// The header ends the archive: in a set, it lies in the last part, or
	// the parts after it hold none of the archive (two archives named as
	// the volumes of one).
	if err := w.sz7End(src, sz7SignatureLen+int64(nextOff+nextSize)); err != nil {
		return err
	}
	hdr := make([]byte, nextSize)
	if _, err := src.ReadAt(hdr, sz7SignatureLen+int64(nextOff)); err != nil {
		return w.readErr("header", err)
	}
	if crc32.ChecksumIEEE(hdr) != nextCRC {
		return malformed(w.format, "header checksum mismatch")
	}

	for round := 0; ; round++ {
		if len(hdr) == 0 {
			return malformed(w.format, "empty header")
		}
		switch hdr[0] {
		case sz7Header:
			p := &sz7Parser{w: w, src: src, r: szReader{b: hdr, off: 1}}
			return p.header()
		case sz7EncodedHeader:
			if round >= sz7MaxNesting {
				return malformed(w.format, "encoded headers nested too deep")
			}
			next, err := decode7zHeader(w, src, szReader{b: hdr, off: 1})
			if err != nil || next == nil {
				return err // next is nil when the header is encrypted
			}
			hdr = next
		default:
			return malformed(w.format, "unexpected header id %#x", hdr[0])
		}
	}
}

// sz7End judges the bytes after end, where the archive ends: in a set,
// parts wholly after it hold none of the archive (two archives named as
// the volumes of one); bytes after it in its own part are a tail that
// 7-Zip warns of and a reader from the end (of a zip appended to the 7z)
// takes for another archive: Suspicious.
func (w *walk) sz7End(src *partSet, end int64) error {
	if src.Len() > 1 && end <= src.Start(src.Len()-1) {
		return notOneArchive(w.format, "the archive ends in part %d of %d: the parts after it hold none of it", src.PartAt(end-1)+1, src.Len())
	}
	if tail := src.Size() - end; tail > 0 {
		w.suspect(fmt.Sprintf("%d bytes after the archive's end", tail))
	}
	return nil
}

// sz7Folder is what the walker needs of one folder (a coder graph).
type sz7Folder struct {
	numOut    int
	mainOut   int // the output stream no bind pair consumes: the folder's result
	encrypted bool
	coders    []sz7Coder // kept only when asked for
	packed    int        // number of packed input streams
}

type sz7Coder struct {
	id            []byte
	props         []byte
	numIn, numOut int
}

// folder reads one folder record.
func (r *szReader) folder(keepCoders bool) sz7Folder {
	var f sz7Folder
	numCoders := r.count("coder")
	if numCoders == 0 || numCoders > sz7MaxCoderIO {
		r.fail("folder with %d coders", numCoders)
		return f
	}
	numIn := 0
	for range numCoders {
		flags := r.byte()
		if flags&0x80 != 0 {
			r.fail("alternative coder methods are not supported")
			return f
		}
		c := sz7Coder{id: r.bytes(uint64(flags & 0x0f)), numIn: 1, numOut: 1}
		if flags&0x10 != 0 {
			c.numIn, c.numOut = r.count("coder input"), r.count("coder output")
		}
		if flags&0x20 != 0 {
			c.props = r.bytes(r.number())
		}
		numIn += c.numIn
		f.numOut += c.numOut
		if numIn > sz7MaxCoderIO || f.numOut > sz7MaxCoderIO {
			r.fail("folder with too many streams")
			return f
		}
		if string(c.id) == sz7MethodAES {
			f.encrypted = true
		}
		if keepCoders {
			f.coders = append(f.coders, c)
		}
	}
	if f.numOut == 0 {
		r.fail("folder without output")
		return f
	}
	var bound [sz7MaxCoderIO]bool
	for range f.numOut - 1 { // bind pairs
		r.number() // in index
		out := r.number()
		if out >= uint64(f.numOut) {
			r.fail("bad bind pair")
			return f
		}
		bound[out] = true
	}
	f.packed = numIn - (f.numOut - 1)
	if f.packed < 1 {
		r.fail("folder without packed streams")
		return f
	}
	if f.packed > 1 {
		for range f.packed {
			r.number()
		}
	}
	f.mainOut = -1
	for i := range f.numOut {
		if !bound[i] {
			f.mainOut = i
			break
		}
	}
	if f.mainOut < 0 {
		r.fail("folder without a final output")
	}
	return f
}

// sz7Streams records where the parts of a StreamsInfo record are in the
// header, so files can be matched to their sizes by re-reading them in step.
type sz7Streams struct {
	packPos      uint64
	packSize0    uint64 // size of the first packed stream (for an encoded header)
	packSizesOff int    // the packed streams' sizes, -1 when absent
	numPack      int    // how many packed streams there are
	numFolders   int
	foldersOff   int // first folder record
	unpackOff    int // first unpack size
	crcDefined   []byte
	allCRC       bool
	crcOff       int // first folder CRC value
	countsOff    int // kNumUnpackStream numbers, -1 when absent (one stream per folder)
	sizesOff     int // kSize numbers of the substreams, -1 when absent
	digestsOff   int // the substreams' digests record, -1 when absent
	digestsN     int // how many streams that record covers
	encrypted    bool
	firstFolder  sz7Folder
	numSubstream uint64
}

func (s *sz7Streams) folderHasCRC(i int) bool { return s.allCRC || bitSet(s.crcDefined, i) }

// streams parses a StreamsInfo record (after its id).
func (r *szReader) streams(keepFirstFolder bool) *sz7Streams {
	s := &sz7Streams{countsOff: -1, sizesOff: -1, digestsOff: -1, packSizesOff: -1}
	id := r.byte()
	if id == sz7PackInfo {
		s.packPos = r.number()
		n := r.count("pack stream")
		s.numPack = n
		for id = r.byte(); id != sz7End && r.err == nil; id = r.byte() {
			switch id {
			case sz7Size:
				s.packSizesOff = r.off
				for i := range n {
					if v := r.number(); i == 0 {
						s.packSize0 = v
					}
				}
			case sz7CRC:
				r.skipDigests(n)
			default:
				r.fail("unexpected property id %#x in pack info", id)
			}
		}
		id = r.byte()
	}
	if id == sz7UnpackInfo {
		r.expect(sz7FolderID)
		s.numFolders = r.count("folder")
		if r.byte() != 0 {
			r.fail("external folders are not supported")
			return s
		}
		s.foldersOff = r.off
		totalOut := 0
		for i := range s.numFolders {
			f := r.folder(keepFirstFolder && i == 0)
			if r.err != nil {
				return s
			}
			if i == 0 {
				s.firstFolder = f
			}
			s.encrypted = s.encrypted || f.encrypted
			totalOut += f.numOut
		}
		r.expect(sz7CodersUnpackSize)
		s.unpackOff = r.off
		for range totalOut {
			r.number()
		}
		for id = r.byte(); id != sz7End && r.err == nil; id = r.byte() {
			if id != sz7CRC {
				r.fail("unexpected property id %#x in unpack info", id)
				break
			}
			s.allCRC = r.byte() != 0
			if !s.allCRC {
				s.crcDefined = r.bytes(uint64((s.numFolders + 7) / 8))
			}
			s.crcOff = r.off
			defined := 0
			for i := range s.numFolders {
				if s.folderHasCRC(i) {
					defined++
				}
			}
			r.bytes(uint64(defined) * 4)
		}
		id = r.byte()
	}
	s.numSubstream = uint64(s.numFolders)
	if id == sz7SubStreamsInfo {
		if s.numFolders == 0 {
			r.fail("substreams info without folders")
			return s
		}
		id = r.byte()
		if id == sz7NumUnpackStream {
			s.countsOff = r.off
			s.numSubstream = 0
			for range s.numFolders {
				s.numSubstream += r.number()
			}
			if s.numSubstream > uint64(len(r.b)) {
				r.fail("substream count %d larger than the header", s.numSubstream)
				return s
			}
			id = r.byte()
		}
		if id == sz7Size {
			s.sizesOff = r.off
			c := s.counts(r.b)
			for range s.numFolders {
				for k := max(c.next(), 1) - 1; k > 0 && r.err == nil; k-- {
					r.number()
				}
			}
			if c.err != nil {
				r.fail("%v", c.err)
			}
			id = r.byte()
		}
		for ; id != sz7End && r.err == nil; id = r.byte() {
			if id != sz7CRC {
				r.fail("unexpected property id %#x in substreams info", id)
				break
			}
			// Digests for the streams whose CRC the folder record does not give.
			c := s.counts(r.b)
			n := 0
			for i := range s.numFolders {
				if k := c.next(); !(k == 1 && s.folderHasCRC(i)) {
					n += int(k)
				}
			}
			s.digestsOff, s.digestsN = r.off, n
			r.skipDigests(n)
		}
		id = r.byte()
	}
	if id != sz7End && r.err == nil {
		r.fail("unexpected property id %#x in streams info", id)
	}
	return s
}

// counts returns a cursor over the per-folder substream counts.
func (s *sz7Streams) counts(b []byte) *szCounts {
	c := &szCounts{}
	if s.countsOff >= 0 {
		c.r = &szReader{b: b, off: s.countsOff}
	}
	return c
}

// szCounts yields the substream count of each folder in turn: the stored
// numbers, or 1 each when the record has none.
type szCounts struct {
	r   *szReader
	err error
}

func (c *szCounts) next() uint64 {
	if c.r == nil {
		return 1
	}
	v := c.r.number()
	if c.r.err != nil {
		c.err = c.r.err
	}
	return v
}

// sz7Parser walks a plain (decoded) header.
type sz7Parser struct {
	w   *walk
	src *partSet
	r   szReader
}

func (p *sz7Parser) bad() error {
	return malformed(p.w.format, "corrupt header: %v", p.r.err)
}

func (p *sz7Parser) header() error {
	r := &p.r
	id := r.byte()
	if id == sz7ArchiveProperties {
		for t := r.byte(); t != sz7End && r.err == nil; t = r.byte() {
			r.bytes(r.number())
		}
		id = r.byte()
	}
	if id == sz7AdditionalStreams {
		r.streams(false)
		id = r.byte()
	}
	s := &sz7Streams{countsOff: -1, sizesOff: -1, digestsOff: -1, packSizesOff: -1}
	if id == sz7MainStreams {
		s = r.streams(false)
		id = r.byte()
	}
	if r.err != nil {
		return p.bad()
	}
	if s.encrypted {
		p.w.listing.Encrypted = true
	}
	if id == sz7FilesInfo {
		first := len(p.w.listing.Entries)
		err := p.files(s)
		if s.encrypted {
			// Folders are not mapped to entries here: every entry with data
			// counts as encrypted when a folder is (7-Zip encrypts all or none).
			for i := first; i < len(p.w.listing.Entries); i++ {
				if e := &p.w.listing.Entries[i]; !e.Dir && e.Size != 0 {
					e.Encrypted = true
				}
			}
		}
		if err != nil {
			return err
		}
		id = r.byte()
	}
	if id != sz7End && r.err == nil {
		r.fail("unexpected property id %#x in header", id)
	}
	if r.err != nil {
		return p.bad()
	}
	return nil
}

// files walks FilesInfo and lists up to MaxEntries files.
func (p *sz7Parser) files(s *sz7Streams) error {
	r := &p.r
	numFiles := r.number()
	var emptyStream, emptyFile, names, attrs []byte
	for {
		t := r.number()
		if t == sz7End || r.err != nil {
			break
		}
		data := r.bytes(r.number())
		switch t {
		case sz7EmptyStream:
			emptyStream = data
		case sz7EmptyFile:
			emptyFile = data
		case sz7Name:
			if len(data) == 0 || data[0] != 0 {
				return &ListError{Format: p.w.format, Reason: "external file names are not supported", Err: ErrUnsupported}
			}
			names = data[1:]
		case sz7WinAttributes:
			attrs = data
		}
	}
	if r.err != nil {
		return p.bad()
	}

	// Attributes: all-defined flag, [defined bits], external flag, values.
	var attrDefined []byte
	allAttrs := false
	var attrVals szReader
	if len(attrs) > 0 {
		a := szReader{b: attrs}
		allAttrs = a.byte() != 0
		if !allAttrs {
			attrDefined = a.bytes((numFiles + 7) / 8)
		}
		if a.byte() != 0 {
			return &ListError{Format: p.w.format, Reason: "external attributes are not supported", Err: ErrUnsupported}
		}
		attrVals = szReader{b: a.b, off: a.off}
	}

	subs := newSz7Substreams(r.b, s)
	crcs := s.substreamCRCs(r.b)
	data := newSz7Data(p.w, p.src, s)
	stream := 0
	nameR := names
	emptyIndex := 0
	for i := uint64(0); i < numFiles; i++ {
		if err := p.w.checkCtx(); err != nil {
			return err
		}
		if p.w.full() {
			p.w.listing.Truncated = true
			return nil
		}
		name, lossy, rest := utf16Name(nameR)
		nameR = rest
		var size int64
		var streamSize uint64
		dir, hasStream := false, false
		// A file without a stream is empty: its CRC is that of no bytes.
		crc := sz7CRCValue{has: true}
		if bitSet(emptyStream, int(i)) {
			dir = !bitSet(emptyFile, emptyIndex)
			emptyIndex++
		} else {
			v, err := subs.next()
			if err != nil {
				return malformed(p.w.format, "corrupt header: %v", err)
			}
			streamSize, hasStream = v, true
			size = int64(min(v, 1<<63-1))
			crc = sz7CRCValue{}
			if stream < len(crcs) {
				crc = crcs[stream]
			}
			stream++
		}
		if attrs != nil && (allAttrs || bitSet(attrDefined, int(i))) {
			if attrVals.u32()&sz7AttrDir != 0 {
				dir = true
			}
			if attrVals.err != nil {
				return malformed(p.w.format, "corrupt header: attributes end early")
			}
		}
		e := p.w.add(name, size, dir)
		if lossy {
			e.Unsafe = true // an unpaired surrogate was replaced
		}
		if !dir {
			e.CRC, e.HasCRC = crc.v, crc.has
		}
		if hasStream {
			checked, err := data.next(subs, i, name, streamSize, crc)
			if err != nil {
				return err
			}
			e.CRCChecked = checked && !dir
		} else if !dir {
			e.CRCChecked = true // no bytes: nothing to differ from the CRC of none
		}
	}
	return nil
}

// decode7zHeader unpacks an encoded header: a StreamsInfo record naming one
// folder (LZMA, LZMA2 or Copy) whose output is the real header. It returns
// nil, nil when the header is encrypted (Listing.Encrypted is set).
func decode7zHeader(w *walk, src *partSet, r szReader) ([]byte, error) {
	s := r.streams(true)
	if r.err != nil {
		return nil, malformed(w.format, "corrupt encoded header: %v", r.err)
	}
	if s.numFolders != 1 {
		return nil, malformed(w.format, "encoded header with %d folders", s.numFolders)
	}
	f := s.firstFolder
	if f.encrypted {
		w.listing.Encrypted, w.listing.HeadersEncrypted = true, true
		return nil, nil
	}
	if len(f.coders) != 1 || f.packed != 1 {
		return nil, &ListError{Format: w.format, Reason: "header compressed with a coder chain", Err: ErrUnsupported}
	}
	ur := szReader{b: r.b, off: s.unpackOff}
	unpacked := ur.number()
	if unpacked > uint64(w.lim.MaxHeaderBytes) {
		return nil, &ListError{Format: w.format, Reason: fmt.Sprintf("header larger than limit (%d > %d bytes unpacked)", unpacked, w.lim.MaxHeaderBytes), Err: ErrLimit}
	}
	avail := uint64(src.Size() - sz7SignatureLen)
	if s.packPos > avail || s.packSize0 > avail-s.packPos {
		return nil, volumeMissing(w.format, "packed header beyond end of file: truncated archive or missing volumes")
	}
	packed := &ctxReader{w: w, r: io.NewSectionReader(src, sz7SignatureLen+int64(s.packPos), int64(s.packSize0))}

	c := f.coders[0]
	if !sz7Decodable(c) {
		return nil, &ListError{Format: w.format, Reason: fmt.Sprintf("header compressed with unsupported method %x", c.id), Err: ErrUnsupported}
	}
	// The decoder needs no window beyond the output, which is at most
	// MaxHeaderBytes.
	dec, err := sz7Decoder(c, packed, unpacked, unpacked)
	if err != nil {
		return nil, malformed(w.format, "bad %s in encoded header: %v", sz7MethodName(c), err)
	}
	out := make([]byte, unpacked)
	if _, err := io.ReadFull(dec, out); err != nil {
		if cerr := w.ctxErr(); cerr != nil {
			return nil, cerr
		}
		return nil, malformed(w.format, "corrupt encoded header: %v", err)
	}
	if s.folderHasCRC(0) {
		cr := szReader{b: r.b, off: s.crcOff}
		if want := cr.u32(); cr.err == nil && crc32.ChecksumIEEE(out) != want {
			return nil, malformed(w.format, "encoded header checksum mismatch")
		}
	}
	return out, nil
}
