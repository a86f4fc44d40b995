package archive

import (
	"bufio"
	"compress/flate"
	"errors"
	"hash/crc32"
	"io"
)

// zipCRCBudget bounds the bytes a zip listing decompresses to check its
// entries' CRC-32s. Listing reads metadata; checking a CRC reads the data,
// so it is done only while it stays cheap (a few hundred milliseconds):
// enough to tell apart a damaged copy of a part from a good one of the
// same size, never the cost of an extraction. Entries past the budget, and
// those whose method cannot be read here (anything but stored and
// deflated) or that are encrypted, are left unchecked.
const zipCRCBudget = 64 << 20

// Zip compression methods whose data the CRC check can read.
const (
	zipMethodStore   = 0
	zipMethodDeflate = 8
)

// zipMaxDeflateRatio bounds how many times deflate expands its input: a
// 258-byte match coded in 2 bits at best.
const zipMaxDeflateRatio = 1032

// zipCRC is the state the CRC checks of one zip listing reuse: a
// directory of a million entries must not cost allocations per entry.
type zipCRC struct {
	used  int64 // bytes decompressed so far, up to zipCRCBudget
	sec   sectionReader
	br    *bufio.Reader
	flate io.ReadCloser
	buf   []byte
}

// sectionReader reads [off, end) of an io.ReaderAt; a value, so reusing
// it allocates nothing.
type sectionReader struct {
	r        io.ReaderAt
	off, end int64
}

func (s *sectionReader) Read(p []byte) (int, error) {
	if s.off >= s.end {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), s.end-s.off)]
	n, err := s.r.ReadAt(p, s.off)
	s.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// checkZipCRC checks the CRC-32 the central directory entry hdr records
// against the entry's data (csize bytes at dataStart, usize once
// decompressed), within zipCRCBudget, and reports whether it did. A
// mismatch, or data that does not decompress to usize bytes, is damage:
// ErrMalformed.
func (w *walk) checkZipCRC(src *partSet, hdr, name []byte, index uint64, dataStart int64, csize, usize uint64) (checked bool, err error) {
	c := &w.zipCRC
	flags, method := le16(hdr[8:]), le16(hdr[10:])
	if flags&zipFlagEncrypted != 0 || (method != zipMethodStore && method != zipMethodDeflate) {
		return false, nil
	}
	// Sizes the data cannot hold are a lie whatever the budget: a stored
	// entry's data is its content, and deflate expands at most 1032 times.
	switch {
	case method == zipMethodStore && usize != csize:
		return false, malformed(w.format, "entry %d (%s): stored data of %d bytes, the directory says %d", index+1, quoteName(name), csize, usize)
	case method == zipMethodDeflate && usize/zipMaxDeflateRatio > csize:
		return false, malformed(w.format, "entry %d (%s): %d bytes deflated cannot hold the %d the directory says", index+1, quoteName(name), csize, usize)
	}
	if usize > uint64(zipCRCBudget-c.used) || csize > uint64(zipCRCBudget) {
		c.used = zipCRCBudget // the rest stays unchecked, in order
		return false, nil
	}
	c.used += int64(usize)
	if c.br == nil && c.buf == nil {
		c.takeReaders()
	}
	c.sec = sectionReader{r: src, off: dataStart, end: dataStart + int64(csize)}
	var r io.Reader = &c.sec
	if method == zipMethodDeflate {
		if c.br == nil {
			c.br = bufio.NewReaderSize(&c.sec, 32<<10)
		} else {
			c.br.Reset(&c.sec)
		}
		if c.flate == nil {
			c.flate = flate.NewReader(c.br)
		} else if err := c.flate.(flate.Resetter).Reset(c.br, nil); err != nil {
			return false, err
		}
		r = c.flate
	}
	if c.buf == nil {
		c.buf = make([]byte, 32<<10)
	}
	var crc uint32
	var n uint64
	for n <= usize {
		k, err := r.Read(c.buf)
		crc = crc32.Update(crc, crc32.IEEETable, c.buf[:k])
		n += uint64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false, malformed(w.format, "entry %d (%s): corrupt data: %v", index+1, quoteName(name), err)
		}
	}
	switch {
	case n != usize:
		return false, malformed(w.format, "entry %d (%s): data holds %d bytes, the directory says %d", index+1, quoteName(name), n, usize)
	case crc != le32(hdr[16:]):
		return false, malformed(w.format, "entry %d (%s): CRC-32 %08x, the directory says %08x", index+1, quoteName(name), crc, le32(hdr[16:]))
	}
	return true, nil
}
