package archive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/ulikunitz/xz/lzma"
)

// sz7DataBudget bounds the bytes a 7z listing decompresses to check its
// files' CRC-32s, as zipCRCBudget does a zip's: enough to tell a damaged
// copy of a small archive, or of a set's first volumes, from a good one of
// the same size, never the cost of an extraction. It also bounds the
// decoder's window: within the budget, no back reference reaches further.
// LZMA decodes several times slower than deflate, and its window is
// memory the listing holds, hence a smaller budget than a zip's.
const sz7DataBudget = 8 << 20

// sz7MaxCheckedFolders bounds the folders the check decodes: each needs a
// decoder of its own (about 10 KB allocated), and a non-solid archive of
// many small files would otherwise cost one per file. A solid archive,
// 7-Zip's default, is one folder.
const sz7MaxCheckedFolders = 1024

// sz7Decodable reports whether the listing can decode coder c's output:
// Copy, LZMA and LZMA2, the coders 7-Zip writes without filters.
func sz7Decodable(c sz7Coder) bool {
	switch string(c.id) {
	case sz7MethodCopy, sz7MethodLZMA, sz7MethodLZMA2:
		return true
	}
	return false
}

func sz7MethodName(c sz7Coder) string {
	switch string(c.id) {
	case sz7MethodLZMA:
		return "LZMA stream"
	case sz7MethodLZMA2:
		return "LZMA2 stream"
	}
	return "stream"
}

// sz7Decoder returns the reader of coder c's output (unpacked bytes in
// all) from packed, decoding with a window of at most window bytes: the
// caller reads no more than that many bytes of it. c is sz7Decodable.
func sz7Decoder(c sz7Coder, packed io.Reader, unpacked, window uint64) (io.Reader, error) {
	switch string(c.id) {
	case sz7MethodLZMA:
		if len(c.props) != 5 {
			return nil, errors.New("bad LZMA properties")
		}
		dict := max(lzma.MinDictCap, min(uint64(le32(c.props[1:])), window))
		var classic [lzma.HeaderLen]byte
		classic[0] = c.props[0]
		binary.LittleEndian.PutUint32(classic[1:], uint32(dict))
		binary.LittleEndian.PutUint64(classic[5:], unpacked)
		return lzma.ReaderConfig{DictCap: int(dict)}.NewReader(io.MultiReader(bytes.NewReader(classic[:]), packed))
	case sz7MethodLZMA2:
		if len(c.props) != 1 || c.props[0] > 40 {
			return nil, errors.New("bad LZMA2 properties")
		}
		d := c.props[0]
		size := uint64(1<<32 - 1)
		if d < 40 {
			size = uint64(2|d&1) << (d/2 + 11)
		}
		return lzma.Reader2Config{DictCap: int(max(lzma.MinDictCap, min(size, window)))}.NewReader2(packed)
	}
	return packed, nil
}

// sz7Data checks the data of a 7z's files against the CRC-32s its header
// records, within sz7DataBudget: fed each file that has data with the
// substream walk that sized it (next), it decodes each folder whose coder
// it can read as the walk enters it. A folder it cannot read (a filter, a
// coder chain, encryption) leaves its files unchecked; once the budget or
// sz7MaxCheckedFolders is spent, or the pack records do not locate a
// folder, so are all the rest.
type sz7Data struct {
	w       *walk
	src     *partSet
	folders int       // folders opened
	dec     io.Reader // the current folder's output; nil: unchecked
	used    uint64    // bytes decoded so far
	stopped bool
	buf     []byte
}

func newSz7Data(w *walk, src *partSet, s *sz7Streams) *sz7Data {
	return &sz7Data{w: w, src: src, stopped: s.encrypted}
}

// next checks the file with data that ss.next sized last, the index'th
// entry named name, of size bytes, against its header's CRC-32 want, and
// reports whether it did. Data that does not decode to size bytes, or
// whose CRC-32 is not want, is damage: ErrMalformed.
func (d *sz7Data) next(ss *sz7Substreams, index uint64, name string, size uint64, want sz7CRCValue) (bool, error) {
	if !d.stopped && ss.began {
		d.open(ss)
	}
	if d.stopped {
		ss.keepCoders = false
		return false, nil
	}
	if d.dec == nil {
		return false, nil
	}
	if size > sz7DataBudget-d.used {
		d.stopped = true // the rest stays unchecked, in order
		return false, nil
	}
	d.used += size
	if d.buf == nil {
		d.buf = make([]byte, 32<<10)
	}
	var crc uint32
	var n uint64
	for n < size {
		k, err := d.dec.Read(d.buf[:min(uint64(len(d.buf)), size-n)])
		crc = crc32.Update(crc, crc32.IEEETable, d.buf[:k])
		n += uint64(k)
		if errors.Is(err, io.EOF) && n < size {
			return false, malformed(d.w.format, "entry %d (%s): data ends after %d of its %d bytes", index+1, strconv.Quote(cutUTF8(name, 80)), n, size)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			if cerr := d.w.ctxErr(); cerr != nil {
				return false, cerr
			}
			return false, malformed(d.w.format, "entry %d (%s): corrupt data: %v", index+1, strconv.Quote(cutUTF8(name, 80)), err)
		}
	}
	if !want.has {
		return false, nil
	}
	if crc != want.v {
		return false, malformed(d.w.format, "entry %d (%s): CRC-32 %08x, the header says %08x", index+1, strconv.Quote(cutUTF8(name, 80)), crc, want.v)
	}
	return true, nil
}

// open opens the decoder of the folder ss just entered when it can be
// checked, or stops the check.
func (d *sz7Data) open(ss *sz7Substreams) {
	d.dec = nil
	d.folders++
	off, end := ss.curOff, d.src.Size()
	if d.folders > sz7MaxCheckedFolders || off < 0 || off > end || ss.curPack > uint64(end-off) {
		d.stopped = true // beyond the archive: the listing is no place to say so
		return
	}
	f := ss.cur
	window := min(ss.total, sz7DataBudget-d.used)
	if f.encrypted || len(f.coders) != 1 || f.packed != 1 || !sz7Decodable(f.coders[0]) || window == 0 {
		return
	}
	dec, err := sz7Decoder(f.coders[0], &ctxReader{w: d.w, r: io.NewSectionReader(d.src, off, int64(ss.curPack))}, ss.total, window)
	if err != nil {
		return // properties 7-Zip would refuse: its files stay unchecked
	}
	d.dec = dec
}
