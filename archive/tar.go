package archive

import (
	"archive/tar"
	"bufio"
	"compress/bzip2"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

// maxDecoderWindow bounds the history window of the xz and zstd decoders,
// which is their memory (the zstd decoder holds twice its window). xz -9
// needs 64 MiB and zstd --ultra -22 128 MiB; streams made with larger
// windows are refused rather than allowed to make one listing take
// gigabytes.
const maxDecoderWindow = 128 << 20

// listTar streams the tar headers, decompressing on the way. archive/tar
// skips entry data itself: by seeking on a plain tar, by reading through the
// decompressor otherwise (nothing is kept).
func listTar(w *walk, src *partSet) error {
	if src.Size() == 0 {
		return malformed(w.format, "empty file")
	}
	section := io.NewSectionReader(src, 0, src.Size())
	raw := &ctxReader{w: w, r: section}
	if w.shown != nil && w.format != FormatTar {
		// The stream is read from its first byte into buffers that the
		// caller sees on another core, to hash them while this inflates.
		ring := newSeenRing(section, src.Size(), w.shown)
		defer ring.stop()
		raw.r = ring
	}
	var r io.Reader
	switch w.format {
	case FormatTar:
		r = ctxReadSeeker{raw, section}
	case FormatTarGz:
		g, err := openGzip(raw)
		if err != nil {
			return w.tarErr(err, 0)
		}
		defer closeGzip(g)
		r = &g.zr
	case FormatTarBz2:
		r = bzip2.NewReader(raw)
	case FormatTarXz:
		// Every block's dictionary is checked before the decoder sees
		// the block (xzGuard), not only the first's.
		xr, err := xz.NewReader(bufio.NewReader(newXzGuard(raw, maxDecoderWindow)))
		if err != nil {
			return w.tarErr(err, 0)
		}
		r = xr
	case FormatTarLz4:
		// Frames are decoded one block (at most 4 MiB) at a time.
		r = lz4.NewReader(raw)
	case FormatTarZst:
		// Decoded in this goroutine (concurrency 1): nothing to leak, and
		// the core beside it is the hash's. The decoder keeps a history of
		// twice the frame's window and moves it down once per window
		// decoded; WithDecoderLowmem would keep the window plus 1 MiB but
		// move it down every MiB decoded: a copy of the whole window per MiB.
		zr, err := zstd.NewReader(raw,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(maxDecoderWindow))
		if err != nil {
			return w.tarErr(err, 0)
		}
		defer zr.Close()
		r = zr
	default:
		return &ListError{Format: w.format, Reason: "not a tar format", Err: ErrUnsupported}
	}

	// The decompressed stream is checked too: a few hundred bytes of
	// bzip2 inflate to gigabytes, so checks on compressed reads alone
	// come too seldom to keep the time bound.
	if w.format != FormatTar {
		r = &ctxReader{w: w, r: r}
	}
	tr := tar.NewReader(r)
	for {
		if err := w.checkCtx(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// The tail is read in 512-byte blocks: through a buffer kept
			// between listings, not one pread or decompressor call a block.
			br := openDirReader(r)
			err := w.tarOneArchive(br, section, src)
			if err == nil {
				err = w.tarTail(br)
			}
			closeDirReader(br)
			return err
		}
		if err != nil {
			return w.tarErr(err, len(w.listing.Entries))
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // PAX defaults for the following entries, not an entry
		}
		if w.full() || w.nameBytes > w.lim.MaxHeaderBytes {
			w.listing.Truncated = true
			return nil
		}
		dir := hdr.Typeflag == tar.TypeDir || strings.HasSuffix(hdr.Name, "/")
		e := w.add(hdr.Name, hdr.Size, dir)
		switch hdr.Typeflag {
		case tar.TypeSymlink:
			// A link out of the root turns later entries into writes outside it.
			w.link(e, hdr.Linkname)
		case tar.TypeLink:
			// A hard link names another entry, from the root.
			if escapesRoot(hdr.Linkname) {
				e.Unsafe, e.LinkEscape = true, true
			}
		}
	}
}

// tarTail reads what follows the tar's end blocks to the end of the
// compressed stream, so that the compressor's own check (gzip's CRC-32 and
// size, xz's and zstd's checksums, bzip2's block and stream CRCs, lz4's
// content checksum) is verified: the archive is checked to its end. Only
// padding is left there as a rule (pixz writes its index), within the time
// bound like the rest. In a set of parts, the tail is first read block by
// block for another tar's header (tarOneArchive). In a single archive, a
// plain tar's included, another tar's header there is a second archive
// that tar lists only with --ignore-zeros (cat a.tar b.tar, two gzip
// members each holding a whole tar): Suspicious, since the listing shows
// the first archive's entries alone; so is anything but zeros after a
// plain tar's end.
func (w *walk) tarTail(r io.Reader) error {
	plain := w.format == FormatTar
	blk := make([]byte, 512)
	for {
		k, eof, err := readBlock(r, blk)
		if err != nil {
			return w.tarErr(err, len(w.listing.Entries))
		}
		if k == 512 && tarHeader(blk) {
			w.suspect("another tar follows the archive's end blocks: tar --ignore-zeros lists entries this listing does not")
			break
		}
		if plain && slices.ContainsFunc(blk[:k], func(c byte) bool { return c != 0 }) {
			// Only zeros pad a plain tar's last record: anything else there
			// (a zip appended, which unzip lists) the tar hides.
			w.suspect("bytes that are not zeros after the archive's end blocks")
			return nil
		}
		if eof {
			return nil
		}
	}
	if plain {
		return nil // no checksum at the end to reach
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return w.tarErr(err, len(w.listing.Entries))
	}
	return nil
}

// tarOneArchive checks, for the parts of a set, that they are one
// archive's, reading r, the stream right after the tar's end blocks, to
// its end in 512-byte blocks (within the listing's bounds, like the rest):
// no block may be another tar's header (two tars, or a compressor that
// reads concatenated streams as one), and in a plain tar, whose bytes are
// the parts', a part that lies wholly after the end holds only zeros.
// Anything else there (padding, pixz's index) is the archive's tail.
// section holds a plain tar's bytes.
func (w *walk) tarOneArchive(r io.Reader, section *io.SectionReader, src *partSet) error {
	n := src.Len()
	if n == 1 {
		return nil
	}
	// A plain tar: the tail's first byte in the parts, and how many of
	// its bytes come before the parts wholly after the end.
	var end int64
	after := int64(-1)
	if w.format == FormatTar {
		var err error
		if end, err = section.Seek(0, io.SeekCurrent); err != nil {
			return w.readErr("archive", err)
		}
		if i := src.PartAt(max(end-1, 0)); i+1 < n {
			after = src.Start(i+1) - end
		}
	}
	blk := make([]byte, 512)
	var off int64 // bytes of the tail read before blk
	for {
		k, eof, err := readBlock(r, blk)
		if err != nil {
			return w.tarErr(err, len(w.listing.Entries))
		}
		b := blk[:k]
		switch {
		case k == 512 && tarHeader(b):
			return notOneArchive(w.format, "another tar follows the archive's end: a part holds another archive")
		case after >= 0 && off+int64(k) > after:
			from := max(after-off, 0)
			if j := slices.IndexFunc(b[from:], func(c byte) bool { return c != 0 }); j >= 0 {
				return notOneArchive(w.format, "the archive ends before part %d of %d, which holds something else",
					src.PartAt(end+off+from+int64(j))+1, n)
			}
		}
		off += int64(k)
		if eof {
			return nil
		}
	}
}

// readBlock fills blk from r; eof says r ended (k may then be short). An
// error is r's own: a decompressor's "unexpected EOF" is a stream cut
// short, not the end.
func readBlock(r io.Reader, blk []byte) (k int, eof bool, err error) {
	for k < len(blk) {
		n, err := r.Read(blk[k:])
		k += n
		if errors.Is(err, io.EOF) {
			return k, true, nil
		}
		if err != nil {
			return k, false, err
		}
	}
	return k, false, nil
}

// tarHeader reports whether blk, a 512-byte block, is a tar header: its
// checksum field holds the sum of its bytes (the field counted as spaces),
// as POSIX and the old formats compute it, signed or not.
func tarHeader(blk []byte) bool {
	if len(blk) != 512 {
		return false
	}
	field := strings.Trim(string(blk[148:156]), " \x00")
	want, err := strconv.ParseUint(field, 8, 32)
	if err != nil || field == "" {
		return false
	}
	var unsigned, signed int64
	for i, b := range blk {
		if i >= 148 && i < 156 {
			b = ' '
		}
		unsigned += int64(b)
		signed += int64(int8(b))
	}
	return int64(want) == unsigned || int64(want) == signed
}

// tarErr turns an error from the decompressor or archive/tar into a *ListError.
func (w *walk) tarErr(err error, listed int) error {
	if cerr := w.ctxErr(); cerr != nil {
		return cerr
	}
	var pathErr *fs.PathError
	var le *ListError
	switch {
	case errors.As(err, &le):
		return le // a limit the stream's guard met (xzGuard)
	case errors.As(err, &pathErr):
		return w.readErr("archive", err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return cutShort(w.format, "truncated archive after %d entries", listed)
	case errors.Is(err, tar.ErrHeader):
		return malformed(w.format, "invalid tar header after %d entries", listed)
	}
	return malformed(w.format, "corrupt stream after %d entries: %s", listed, cutUTF8(err.Error(), 200))
}

// ctxReader fails reads once its walk must stop (context done, time bound
// passed), so that a long decompression notices between two headers.
type ctxReader struct {
	w *walk
	r io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.w.stopCause(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ctxReadSeeker keeps the Seek of a plain tar's reader visible to
// archive/tar, which then skips entry data without reading it.
type ctxReadSeeker struct {
	*ctxReader
	s io.Seeker
}

func (c ctxReadSeeker) Seek(offset int64, whence int) (int64, error) { return c.s.Seek(offset, whence) }
