package archive

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// xzGuard passes an xz file's bytes to the decoder after walking its
// container (streams, block headers, LZMA2 chunks, index, footer,
// padding) as they go by, so that every block's LZMA2 dictionary is seen
// before the decoder is given the header that asks for it: the decoder
// allocates the whole dictionary a block asks for, up to 4 GiB, at that
// block's start, and an xz file may hold many streams and blocks (xz -T,
// pxz, streams concatenated), each asking for its own. A block asking for
// more than limit ends the read with an ErrLimit. Bytes the walk cannot
// follow are passed on unwatched: the decoder, which reads the same
// structure, refuses them itself.
type xzGuard struct {
	r     io.Reader
	limit int64
	st    xzState
	buf   [1024]byte // a stream, block or chunk header being gathered
	n     int        // bytes gathered in buf
	want  int        // bytes buf needs
	skip  int64      // bytes left to pass in xzSkipData or xzSkipTail
	after xzState    // the state after xzSkipTail
	comp  int64      // the compressed bytes of the block so far
	check int64      // the size of the stream's block check
	ctl   byte       // the LZMA2 chunk's control byte
	vlis  uint64     // index VLIs left after the record count
	vliN  int        // bytes of the index VLI being read
	vliV  uint64     // its value so far
	count bool       // the VLI being read is the record count
	ilen  int64      // the index's bytes so far
}

type xzState int

const (
	xzStreamHeader  xzState = iota // gathering 12 bytes
	xzBlockOrIndex                 // a block header's size byte, or the index's 0
	xzBlockHeader                  // gathering the block header
	xzChunk                        // an LZMA2 chunk's control byte, or 0 at the end
	xzChunkHeader                  // gathering the rest of the chunk's header
	xzSkipData                     // passing the chunk's data
	xzSkipTail                     // passing padding, checks, index tail, footer
	xzIndex                        // reading the index's VLIs
	xzStreamPadding                // zeros, or the next stream's magic
	xzOff                          // not followed any more
)

const xzMagic = "\xfd7zXZ\x00"

func newXzGuard(r io.Reader, limit int64) *xzGuard {
	return &xzGuard{r: r, limit: limit, want: 12}
}

func (g *xzGuard) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if gerr := g.walk(p[:n]); gerr != nil {
		return 0, gerr
	}
	return n, err
}

// pad4 is the padding that brings n to a multiple of four.
func pad4(n int64) int64 { return (4 - n%4) % 4 }

// walk follows b, the next bytes of the file.
func (g *xzGuard) walk(b []byte) error {
	for len(b) > 0 {
		switch g.st {
		case xzStreamHeader, xzBlockHeader, xzChunkHeader:
			k := copy(g.buf[g.n:g.want], b)
			g.n += k
			b = b[k:]
			if g.st == xzChunkHeader {
				g.comp += int64(k)
			}
			if g.n == g.want {
				if err := g.gathered(); err != nil {
					return err
				}
			}
		case xzBlockOrIndex:
			c := b[0]
			b = b[1:]
			if c == 0 {
				g.st, g.ilen, g.count, g.vliN, g.vliV = xzIndex, 1, true, 0, 0
				continue
			}
			g.buf[0], g.n, g.want, g.st = c, 1, (int(c)+1)*4, xzBlockHeader
		case xzChunk:
			c := b[0]
			b = b[1:]
			g.comp++
			switch {
			case c == 0: // the block's end: padding and check
				g.skip, g.after, g.st = pad4(g.comp)+g.check, xzBlockOrIndex, xzSkipTail
			case c == 1 || c == 2: // uncompressed: two bytes of size
				g.ctl, g.n, g.want, g.st = c, 0, 2, xzChunkHeader
			case c >= 0x80: // LZMA: sizes, and properties on a reset
				g.ctl, g.n, g.want, g.st = c, 0, 4, xzChunkHeader
				if c >= 0xc0 {
					g.want = 5
				}
			default:
				g.st = xzOff
			}
		case xzSkipData, xzSkipTail:
			k := min(g.skip, int64(len(b)))
			g.skip -= k
			b = b[k:]
			if g.st == xzSkipData {
				g.comp += k
			}
			switch {
			case g.skip > 0:
			case g.st == xzSkipData:
				g.st = xzChunk
			default:
				g.st = g.after
			}
		case xzIndex:
			b = g.index(b)
		case xzStreamPadding:
			switch b[0] {
			case 0:
				b = b[1:]
			case xzMagic[0]:
				g.n, g.want, g.st = 0, 12, xzStreamHeader
			default:
				g.st = xzOff
			}
		default: // xzOff
			return nil
		}
	}
	return nil
}

// index reads the index's VLIs (the record count, then two per record)
// from b and returns what is left of b.
func (g *xzGuard) index(b []byte) []byte {
	c := b[0]
	g.ilen++
	g.vliV |= uint64(c&0x7f) << (7 * g.vliN)
	g.vliN++
	if c&0x80 != 0 {
		if g.vliN == 9 {
			g.st = xzOff
		}
		return b[1:]
	}
	if g.count {
		if g.vliV > 1<<40 {
			g.st = xzOff // more records than any file holds
			return b[1:]
		}
		g.count, g.vlis = false, 2*g.vliV
	} else {
		g.vlis--
	}
	g.vliN, g.vliV = 0, 0
	if g.vlis == 0 {
		// Padding, the index's CRC32, the stream footer.
		g.skip, g.after, g.st = pad4(g.ilen)+4+12, xzStreamPadding, xzSkipTail
	}
	return b[1:]
}

// gathered handles a header gathered in buf.
func (g *xzGuard) gathered() error {
	h := g.buf[:g.n]
	switch g.st {
	case xzStreamHeader:
		if string(h[:len(xzMagic)]) != xzMagic {
			g.st = xzOff
			return nil
		}
		g.check = 0
		if id := int64(h[7] & 0x0f); id != 0 {
			g.check = 4 << ((id - 1) / 3)
		}
		g.st = xzBlockOrIndex
	case xzBlockHeader:
		dict, ok := xzBlockDict(h)
		if !ok || crc32.ChecksumIEEE(h[:len(h)-4]) != binary.LittleEndian.Uint32(h[len(h)-4:]) {
			// A damaged header is the decoder's to report as such.
			g.st = xzOff
			return nil
		}
		if dict > g.limit {
			return &ListError{Format: FormatTarXz, Err: ErrLimit,
				Reason: fmt.Sprintf("xz dictionary of %d MiB over the %d MiB listing limit", dict>>20, g.limit>>20)}
		}
		g.comp, g.st = 0, xzChunk
	case xzChunkHeader:
		if g.ctl < 0x80 {
			g.skip = int64(binary.BigEndian.Uint16(h)) + 1 // uncompressed: its size
		} else {
			g.skip = int64(binary.BigEndian.Uint16(h[2:])) + 1 // LZMA: its packed size
		}
		g.st = xzSkipData
	}
	return nil
}

// xzBlockDict returns the LZMA2 dictionary size the xz block header h
// asks for; ok is false when h names none that can be read.
func xzBlockDict(h []byte) (size int64, ok bool) {
	hlen := (int(h[0]) + 1) * 4
	if h[0] == 0 || len(h) < hlen {
		return 0, false // the index, or a header we cannot see
	}
	flags := h[1]
	p := h[2:hlen]
	readVLI := func() (uint64, bool) {
		var v uint64
		for i := 0; i < 9 && len(p) > 0; i++ {
			c := p[0]
			p = p[1:]
			v |= uint64(c&0x7f) << (7 * i)
			if c&0x80 == 0 {
				return v, true
			}
		}
		return 0, false
	}
	if flags&0x40 != 0 {
		if _, ok := readVLI(); !ok {
			return 0, false
		}
	}
	if flags&0x80 != 0 {
		if _, ok := readVLI(); !ok {
			return 0, false
		}
	}
	for range int(flags&3) + 1 {
		id, ok1 := readVLI()
		n, ok2 := readVLI()
		if !ok1 || !ok2 || n > uint64(len(p)) {
			return 0, false
		}
		props := p[:n]
		p = p[n:]
		if id == 0x21 && n == 1 { // LZMA2
			d := props[0] & 0x3f
			if d > 40 {
				return 0, false
			}
			if d == 40 {
				return 1<<32 - 1, true
			}
			return int64(2|d&1) << (d/2 + 11), true
		}
	}
	return 0, false
}
