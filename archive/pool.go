package archive

import (
	"bufio"
	"compress/gzip"
	"io"
	"sync"
)

// The readers below are kept between listings. A listing of a small
// archive would otherwise allocate its decompressor's window and its read
// buffers anew (about 100 KiB for a tar.gz, over 100 KiB for a zip whose
// CRCs are checked), which the garbage collector then pays for at
// thousands of archives a second. Each is reset before use and holds no
// reference to its last input once back in its pool.

// gunzip is a gzip reader with the buffer it reads its input through.
type gunzip struct {
	br *bufio.Reader
	zr gzip.Reader
}

var gunzips sync.Pool // *gunzip

// openGzip returns a gzip reader of r's stream (concatenated members are
// read as one, as gzip.NewReader's); closeGzip gives it back.
func openGzip(r io.Reader) (*gunzip, error) {
	g, _ := gunzips.Get().(*gunzip)
	if g == nil {
		g = &gunzip{br: bufio.NewReader(r)}
	} else {
		g.br.Reset(r)
	}
	if err := g.zr.Reset(g.br); err != nil {
		closeGzip(g)
		return nil, err
	}
	return g, nil
}

// closeGzip gives g back. Its gzip.Reader is not closed: Close only
// marks its inflater done (and dereferences nil after a header that
// failed), and the next Reset starts both anew.
func closeGzip(g *gunzip) {
	g.br.Reset(nil)
	gunzips.Put(g)
}

// dirReaderSize is the buffer a zip's central directory, or a tar's tail
// after its end blocks, is read through.
const dirReaderSize = 64 << 10

var dirReaders sync.Pool // *bufio.Reader of dirReaderSize

func openDirReader(r io.Reader) *bufio.Reader {
	if br, _ := dirReaders.Get().(*bufio.Reader); br != nil {
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, dirReaderSize)
}

func closeDirReader(br *bufio.Reader) {
	br.Reset(nil)
	dirReaders.Put(br)
}

// crcReaders are the zipCRC's buffers and inflater between listings.
var crcReaders sync.Pool // *zipCRC

// takeReaders gives c the buffers a CRC check of an earlier listing
// left, if any.
func (c *zipCRC) takeReaders() {
	if old, _ := crcReaders.Get().(*zipCRC); old != nil {
		c.br, c.flate, c.buf = old.br, old.flate, old.buf
	}
}

// giveReaders puts c's buffers back for a later listing.
func (c *zipCRC) giveReaders() {
	if c.br == nil && c.flate == nil && c.buf == nil {
		return
	}
	if c.br != nil {
		c.br.Reset(nil)
	}
	crcReaders.Put(&zipCRC{br: c.br, flate: c.flate, buf: c.buf})
	c.br, c.flate, c.buf = nil, nil, nil
}
