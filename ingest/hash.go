package ingest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"

	"stashd/archive"
)

// contentHasher computes a package's content hash (SHA-256 over its parts
// in set order) and each part's own SHA-256 from the same reads, one part
// at a time, never holding a file in memory. A one-part package's content
// hash is that part's hash, so it is computed once: hashing every byte
// twice would halve the throughput of the common case.
type contentHasher struct {
	single  bool
	content hash.Hash
	last    []byte
}

// hashBufs are part's read buffers, shared by the workers: one of its own
// for each package would be half of what ingest allocates.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func newContentHasher(parts int) *contentHasher {
	h := &contentHasher{single: parts == 1}
	if !h.single {
		h.content = sha256.New()
	}
	return h
}

// part hashes the file at path, the next part, and returns its SHA-256 and
// size.
func (h *contentHasher) part(path string) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	ph := sha256.New()
	var w io.Writer = ph
	if h.content != nil {
		w = io.MultiWriter(ph, h.content)
	}
	buf := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(buf)
	// Through a plain reader: *os.File's WriteTo would copy through a
	// buffer of its own, allocated for each part.
	n, err := io.CopyBuffer(w, struct{ io.Reader }{f}, *buf)
	if err != nil {
		return nil, 0, err
	}
	h.last = ph.Sum(nil)
	return h.last, n, nil
}

// sum returns the content hash of the parts hashed so far.
func (h *contentHasher) sum() []byte {
	if h.single {
		return h.last
	}
	return h.content.Sum(nil)
}

// Hashed is what HashParts computed.
type Hashed struct {
	// Content is the package's content hash: SHA-256 over the parts'
	// bytes in order.
	Content []byte
	// Parts are the parts' own SHA-256, and Sizes their sizes.
	Parts [][]byte
	Sizes []int64
}

// HashParts hashes the files of one package, in set order, exactly as the
// pipeline does after downloading them (one streaming pass per part). The
// benchmark measures it against crypto/sha256 alone.
func HashParts(paths []string) (Hashed, error) {
	h := newContentHasher(len(paths))
	var out Hashed
	for _, p := range paths {
		sum, n, err := h.part(p)
		if err != nil {
			return Hashed{}, fmt.Errorf("hash %s: %w", p, err)
		}
		out.Parts = append(out.Parts, sum)
		out.Sizes = append(out.Sizes, n)
	}
	out.Content = h.sum()
	return out, nil
}

// partsHasher hashes a package's parts read as one stream, their
// concatenation in set order, given their sizes: each part's SHA-256 and
// the content hash, as contentHasher does part by part.
type partsHasher struct {
	sizes   []int64
	i       int   // the part being hashed
	left    int64 // its bytes not yet hashed
	ph      hash.Hash
	content hash.Hash // nil for one part: its hash is the content hash
	out     Hashed
}

func newPartsHasher(sizes []int64) *partsHasher {
	h := &partsHasher{sizes: sizes, ph: sha256.New()}
	if len(sizes) > 1 {
		h.content = sha256.New()
	}
	if len(sizes) > 0 {
		h.left = sizes[0]
	}
	return h
}

// Write hashes the next bytes of the stream.
func (h *partsHasher) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		h.endParts()
		if h.i >= len(h.sizes) {
			return n - len(p), errors.New("parts grew while being hashed")
		}
		k := min(int64(len(p)), h.left)
		h.ph.Write(p[:k])
		if h.content != nil {
			h.content.Write(p[:k])
		}
		h.left -= k
		p = p[k:]
	}
	return n, nil
}

// endParts closes the parts whose bytes are all hashed.
func (h *partsHasher) endParts() {
	for h.i < len(h.sizes) && h.left == 0 {
		h.out.Parts = append(h.out.Parts, h.ph.Sum(nil))
		h.out.Sizes = append(h.out.Sizes, h.sizes[h.i])
		h.ph.Reset()
		h.i++
		if h.i < len(h.sizes) {
			h.left = h.sizes[h.i]
		}
	}
}

// sum returns the hashes once every byte of every part is hashed.
func (h *partsHasher) sum() (Hashed, error) {
	h.endParts()
	if h.i < len(h.sizes) {
		return Hashed{}, errors.New("parts shrank while being hashed")
	}
	if h.content == nil {
		h.out.Content = h.out.Parts[0]
	} else {
		h.out.Content = h.content.Sum(nil)
	}
	return h.out, nil
}

// readsWholeStream reports whether listing format reads every byte of the
// parts (a compressed tar, whose headers are spread through its stream):
// then hashing them from the listing's own read saves a second pass.
func readsWholeStream(format archive.Format) bool {
	switch format {
	case archive.FormatTarGz, archive.FormatTarBz2, archive.FormatTarXz, archive.FormatTarZst, archive.FormatTarLz4:
		return true
	}
	return false
}

// HashList hashes and lists the files of one package (paths in set order)
// as the pipeline does: a compressed tar in a single read, its bytes
// hashed on one core as the decompressor reads them on another; any other
// format hashed in one streaming pass while it is listed from its
// metadata on another core. listErr is the listing's error (the archive
// may be broken and still be mirrored); err is an error reading or
// hashing the files.
func HashList(ctx context.Context, format archive.Format, paths []string, lim archive.Limits) (h Hashed, l archive.Listing, listErr, err error) {
	if !readsWholeStream(format) {
		// The listing reads metadata, and a zip's listing checks its
		// entries' CRC-32s within a budget, tens of megabytes: it runs
		// on another core beside the hash, and is always waited for.
		type listed struct {
			l   archive.Listing
			err error
		}
		done := make(chan listed, 1)
		go func() {
			l, err := archive.List(ctx, format, paths, lim)
			done <- listed{l, err}
		}()
		h, err = HashParts(paths)
		r := <-done
		if err != nil {
			return Hashed{}, archive.Listing{}, nil, err
		}
		return h, r.l, r.err, nil
	}
	sizes := make([]int64, len(paths))
	for i, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return Hashed{}, archive.Listing{}, nil, fmt.Errorf("hash %s: %w", p, err)
		}
		sizes[i] = st.Size()
	}
	ph := newPartsHasher(sizes)

	// The listing calls this on another core than the one inflating, so
	// that inflating and hashing share the time of the slower, not their
	// sum; it reads the listing's own buffers, nothing is copied.
	var werr error
	l, n, listErr := archive.ListSeeing(ctx, format, paths, lim, func(p []byte) {
		if werr == nil {
			_, werr = ph.Write(p)
		}
	})
	if werr != nil {
		return Hashed{}, archive.Listing{}, nil, werr
	}
	if err := ctx.Err(); err != nil {
		return Hashed{}, archive.Listing{}, nil, err
	}
	// The listing may stop before the end (a broken stream, a limit):
	// the rest is hashed here.
	if err := hashFrom(ph, paths, sizes, n); err != nil {
		return Hashed{}, archive.Listing{}, nil, err
	}
	if h, err = ph.sum(); err != nil {
		return Hashed{}, archive.Listing{}, nil, err
	}
	return h, l, listErr, nil
}

// hashFrom writes to h the parts' bytes from offset off of their
// concatenation to the end.
func hashFrom(h *partsHasher, paths []string, sizes []int64, off int64) error {
	var buf []byte
	var start, total int64
	for _, n := range sizes {
		total += n
	}
	for i, p := range paths {
		end := start + sizes[i]
		if off < end {
			if buf == nil {
				buf = make([]byte, min(total-max(off, start), 256<<10))
			}
			f, err := os.Open(p)
			if err != nil {
				return fmt.Errorf("hash %s: %w", p, err)
			}
			_, err = io.CopyBuffer(h, io.NewSectionReader(f, max(off-start, 0), end-max(off, start)), buf)
			f.Close()
			if err != nil {
				return fmt.Errorf("hash %s: %w", p, err)
			}
		}
		start = end
	}
	return nil
}
