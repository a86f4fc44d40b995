package archive

import (
	"context"
	"io"
	"time"
)

// seenChunk is the size of the reads a compressed tar's stream is read in
// while it is shown to a ListSeeing caller.
const seenChunk = 256 << 10

// ListSeeing is List that also shows the caller the bytes it reads, so that
// one read of the parts serves both the listing and a hash of them. A
// compressed tar must be read from its first byte to its last to reach
// every header; its bytes are passed to seen in order, from offset 0 of the
// concatenated parts, in chunks of at most 256 KiB, as they are read for
// the decompressor. seen must not keep p after it returns. The other formats
// read only their metadata and never call seen.
//
// ListSeeing returns, with List's results, how many bytes were passed to
// seen: a prefix of the parts, short of their total when the listing
// stopped early (an error, MaxEntries, the time bound) or the format read
// only metadata. The caller reads the rest itself.
func ListSeeing(ctx context.Context, format Format, parts []string, lim Limits, seen func(p []byte)) (Listing, int64, error) {
	if len(parts) == 0 {
		return Listing{}, 0, &ListError{Format: format, Reason: "no parts given", Err: ErrUnsupported}
	}
	src, err := openParts(parts)
	if err != nil {
		return Listing{}, 0, &ListError{Format: format, Reason: err.Error(), Err: err}
	}
	defer src.Close()
	sr := &seenReader{seen: seen}
	l, err := listWatched(ctx, format, src, lim, time.Now, sr)
	return l, sr.n, err
}

// seenReader passes what it reads from r to seen and counts it.
type seenReader struct {
	r    io.Reader
	seen func([]byte)
	n    int64
}

func (s *seenReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.seen(p[:n])
		s.n += int64(n)
	}
	return n, err
}
