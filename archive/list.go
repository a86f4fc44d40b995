package archive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// Entry is one file or directory recorded in an archive.
type Entry struct {
	// Path is the entry's name cleaned for storage (see Limits.MaxPathBytes):
	// valid UTF-8, no control characters, at most MaxPathBytes bytes, and
	// no trailing '/' on directories.
	Path string
	// Size is the uncompressed size in bytes; -1 when the archive does not
	// record it.
	Size int64
	// Dir is true for a directory entry.
	Dir bool
	// Unsafe is true when the stored name would escape an extraction root
	// (absolute, drive letter, a ".." component, backslash tricks), when a
	// link entry points outside the root, or when the name had to be cleaned
	// (invalid UTF-8 or control characters).
	Unsafe bool
	// Raw is the name exactly as the archive stores it (at most 64 KiB of
	// it) when Path differs from it by more than a directory's trailing
	// '/': the name was cleaned or cut. "" otherwise.
	Raw string
	// Cleaned is true when invalid UTF-8 or control characters (NUL
	// included) had to be replaced or removed from the stored name.
	Cleaned bool
	// Cut is true when the name was longer than MaxPathBytes and was cut.
	Cut bool
	// Bidi is true when the name holds a bidirectional override, embedding
	// or isolate character (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F,
	// U+061C): "txt.exe" shown as "exe.txt".
	Bidi bool
	// ZeroWidth is true when the name holds a zero-width character
	// (U+200B–U+200D, U+2060–U+2064, U+FEFF, U+180E, soft hyphen, U+034F):
	// two names that look the same differ.
	ZeroWidth bool
	// LinkEscape is true for a link whose target lies outside the
	// extraction root, and for every later entry whose path goes through
	// such a link: extracting it writes outside the root. Unsafe is set too.
	LinkEscape bool
	// Encrypted is true when the entry's data is encrypted.
	Encrypted bool
	// CRC is the CRC-32 of the entry's content as the archive records it
	// (zip, RAR); HasCRC says whether it does. A RAR file continued in the
	// next volume records only its first part's CRC there: none is given.
	CRC    uint32
	HasCRC bool
	// CRCChecked is true when the listing read the entry's data and found
	// the CRC it records (zip, within a budget: checkZipCRC). A CRC not
	// checked is the archive's claim only.
	CRCChecked bool
}

// Limits bounds the work and memory of one List call. Zero fields take the
// defaults; negative fields count as zero.
type Limits struct {
	// MaxEntries is the most entries listed; more set Listing.Truncated.
	// 0 means 100,000.
	MaxEntries int
	// MaxHeaderBytes bounds the archive metadata read: the zip central
	// directory (a longer one is listed up to the bound and marked
	// Truncated), a 7z header, packed or unpacked (a larger one is an error),
	// the RAR block headers (listing stops at the bound, Truncated), and
	// the names a tar listing keeps (Path and Raw; archive/tar bounds
	// each header, not their sum: past the bound the listing stops,
	// Truncated).
	// 0 means 64 MiB.
	MaxHeaderBytes int64
	// MaxPathBytes is the longest Entry.Path kept; longer names are cut on a
	// rune boundary. 0 means 4096.
	MaxPathBytes int
	// MaxDuration bounds the time of one listing: a small compressed tar of
	// zeros decompresses for minutes. A listing over it ends with a
	// *ListError wrapping ErrLimit, with the entries found so far.
	// 0 means 10 s.
	MaxDuration time.Duration
}

// Default limits, used for zero Limits fields.
const (
	DefaultMaxEntries     = 100_000
	DefaultMaxHeaderBytes = 64 << 20
	DefaultMaxPathBytes   = 4096
	DefaultMaxDuration    = 10 * time.Second
)

func (l Limits) withDefaults() Limits {
	return Limits{
		MaxEntries:     cmp.Or(max(l.MaxEntries, 0), DefaultMaxEntries),
		MaxHeaderBytes: cmp.Or(max(l.MaxHeaderBytes, 0), DefaultMaxHeaderBytes),
		MaxPathBytes:   cmp.Or(max(l.MaxPathBytes, 0), DefaultMaxPathBytes),
		MaxDuration:    cmp.Or(max(l.MaxDuration, 0), DefaultMaxDuration),
	}
}

// Listing is what List found in an archive. The zero value is an empty listing.
type Listing struct {
	// Entries are the entries in archive order (directory order for zip and 7z).
	Entries []Entry
	// Truncated is true when the archive holds more entries than were listed
	// because a limit (MaxEntries, or MaxHeaderBytes for zip, RAR and tar) stopped the walk.
	Truncated bool
	// Encrypted is true when some entry's data is encrypted, or the whole
	// header is (then Entries is empty: names cannot be read without the password).
	Encrypted bool
	// HeadersEncrypted is true when the names themselves are encrypted (7z
	// with encrypted headers, RAR with a password on its headers): Entries
	// is empty because nothing can be read, not because the archive is.
	HeadersEncrypted bool
	// Format is the format listed: the one asked for, or the one the
	// bytes' magic names when they contradict it (a rar named .zip).
	Format Format
	// NameLied is true when the bytes are another format than the one
	// asked for (the name's): a rar named .zip, a zip without extension.
	NameLied bool
	// Volume is true when the archive's main header marks it a volume of
	// a multi-volume archive (RAR: every volume carries the flag), even
	// when the listing stopped before its end said whether one follows.
	Volume bool
	// SFX is true when the archive follows an executable stub (a
	// self-extractor); Offset is the stub's size when known.
	SFX    bool
	Offset int64
	// Suspicious lists what the structure lies about while still listing:
	// an end record hidden in a zip comment, a central directory that
	// disagrees with the local headers. Short phrases fit for a flag.
	Suspicious []string
}

// Sentinel causes carried by a *ListError; test them with errors.Is.
var (
	// ErrMalformed means the archive bytes are not a valid archive of the
	// format, or are cut short.
	ErrMalformed = errors.New("malformed archive")
	// ErrVolumeMissing means the parts given are not the whole set: the
	// archive says a volume follows the last part given (RAR, whose
	// .partN.rar names have no end marker), or its header lies beyond the
	// bytes given (7z .001 … split), or a split zip has fewer disks than it
	// names. It is an ErrMalformed too.
	ErrVolumeMissing = fmt.Errorf("%w: volume missing", ErrMalformed)
	// ErrUnsupported means the archive uses a feature this package cannot list.
	ErrUnsupported = errors.New("unsupported archive")
	// ErrLimit means a limit made listing impossible or stopped it (a 7z
	// header over MaxHeaderBytes, a listing over MaxDuration).
	ErrLimit = errors.New("archive over listing limit")
	// ErrCutShort means the archive ends before its end: a zip without
	// its end record, a compressed tar whose stream stops early. In a byte
	// split (x.zip.001 …) it means a later part is missing. It is an
	// ErrMalformed too.
	ErrCutShort = fmt.Errorf("%w: cut short", ErrMalformed)
	// ErrEmpty means the file has no bytes: never an archive, whatever
	// its name. It is an ErrMalformed too.
	ErrEmpty = fmt.Errorf("%w: empty file", ErrMalformed)
	// ErrNotOneArchive means the parts given are not the volumes of one
	// archive: the archive ends before the last part, or starts after the
	// first, and the parts beyond it hold something else (another archive
	// named as a volume of this one). It is an ErrMalformed too.
	ErrNotOneArchive = fmt.Errorf("%w: parts of more than one archive", ErrMalformed)
)

// ListError is the error List returns. Its text is short and fit to be
// stored in the catalogue as the listing error, e.g.
// "zip: truncated central directory (3 of 10 entries)".
type ListError struct {
	// Format is the format that was being listed.
	Format Format
	// Reason is the human-readable cause, without the format prefix.
	Reason string
	// Err is the underlying cause: ErrMalformed, ErrUnsupported, ErrLimit,
	// an I/O error from reading the parts, or the context's error.
	Err error
}

// Error returns "<format>: <reason>".
func (e *ListError) Error() string { return string(e.Format) + ": " + e.Reason }

// Unwrap returns the underlying cause.
func (e *ListError) Unwrap() error { return e.Err }

func malformed(f Format, format string, args ...any) *ListError {
	return &ListError{Format: f, Reason: fmt.Sprintf(format, args...), Err: ErrMalformed}
}

// cutShort is malformed for an archive that stops before its end.
func cutShort(f Format, format string, args ...any) *ListError {
	return &ListError{Format: f, Reason: fmt.Sprintf(format, args...), Err: ErrCutShort}
}

// notOneArchive is malformed for parts that are not one archive's.
func notOneArchive(f Format, format string, args ...any) *ListError {
	return &ListError{Format: f, Reason: fmt.Sprintf(format, args...), Err: ErrNotOneArchive}
}

// volumeMissing is malformed for a set that lacks a volume.
func volumeMissing(f Format, format string, args ...any) *ListError {
	return &ListError{Format: f, Reason: fmt.Sprintf(format, args...), Err: ErrVolumeMissing}
}

// List lists the archive made of parts (local file paths, in set order; one
// element for a single archive) without extracting anything. Whatever the
// bytes are, memory stays bounded by lim (plus at most a 128 MiB decoder
// window for tar.xz and tar.zst). Entry data is skipped, never read, except
// in compressed tars, whose stream must be decompressed (and discarded) to
// reach the next header: their time grows with the archive, so pass a ctx
// that can end. A 7z compressed header is decompressed too, within
// MaxHeaderBytes. When the magic number of the first part names another
// format than format, the bytes win: Listing.Format says what was listed.
//
// On a malformed archive List returns what it could list AND an error (a
// *ListError). When ctx ends it returns the entries so far and a *ListError
// wrapping ctx.Err(). Panics inside a decoder are recovered into an error.
func List(ctx context.Context, format Format, parts []string, lim Limits) (Listing, error) {
	if len(parts) == 0 {
		return Listing{}, &ListError{Format: format, Reason: "no parts given", Err: ErrUnsupported}
	}
	src, err := openParts(parts)
	if err != nil {
		return Listing{}, &ListError{Format: format, Reason: err.Error(), Err: err}
	}
	defer src.Close()
	return listParts(ctx, format, src, lim)
}

// listParts is List over parts already open: the tests and the fuzz target
// hand it in-memory readers.
func listParts(ctx context.Context, format Format, src *partSet, lim Limits) (Listing, error) {
	return listClock(ctx, format, src, lim, time.Now)
}

// listClock is listParts with the clock the time bound is measured on.
func listClock(ctx context.Context, format Format, src *partSet, lim Limits, now func() time.Time) (l Listing, err error) {
	return listWatched(ctx, format, src, lim, now, nil)
}

// listWatched is listClock that shows a compressed tar's stream to seen
// as it is read (see ListSeeing).
func listWatched(ctx context.Context, format Format, src *partSet, lim Limits, now func() time.Time, seen *seer) (l Listing, err error) {
	lim = lim.withDefaults()
	if src.Size() == 0 {
		return Listing{Format: format}, &ListError{Format: format, Reason: "empty file (0 bytes)", Err: ErrEmpty}
	}
	det := sniffParts(src)
	named := format
	if det.Format != FormatNone && det.Format != format {
		// The name lies (a rar named .zip, a plain tar named .tar.gz, a
		// zip without extension): the bytes decide.
		format = det.Format
	}
	if det.Format == Format7z && det.Offset > 0 && src.Len() == 1 {
		// A self-extractor: the 7z archive's offsets count from its
		// signature, after the stub.
		src = src.from(det.Offset)
	}
	w := &walk{ctx: ctx, format: format, lim: lim, now: now, deadline: now().Add(lim.MaxDuration), shown: seen, zipFirst: -1}
	if err := w.ctxErr(); err != nil {
		return Listing{}, err
	}
	defer w.zipCRC.giveReaders()
	defer func() {
		// A walker bug on hostile input must cost one listing, not the daemon.
		if p := recover(); p != nil {
			l, err = w.listing, &ListError{Format: format, Reason: fmt.Sprintf("internal error while listing: %v", p), Err: ErrMalformed}
		}
	}()

	w.listing.Format = format
	w.listing.NameLied = named != format && named != FormatNone || named == FormatNone && format != FormatNone
	w.listing.SFX, w.listing.Offset = det.SFX, det.Offset
	switch format {
	case FormatZip:
		// What the layout hides is judged of a listing that ended well:
		// not past the time bound, nor of a directory that failed.
		if err = listZip(w, src); err == nil {
			w.zipOverlaps()
			w.zipPrefix(src)
		}
	case FormatRar:
		err = listRar(w, src)
	case Format7z:
		err = list7z(w, src)
	case FormatTar, FormatTarGz, FormatTarBz2, FormatTarXz, FormatTarZst, FormatTarLz4:
		err = listTar(w, src)
	default:
		err = &ListError{Format: format, Reason: "not an archive format", Err: ErrUnsupported}
	}
	if err != nil {
		// A read that failed because the context ended or the time bound
		// passed is reported as that.
		var le *ListError
		if cerr := w.ctxErr(); cerr != nil && !(errors.As(err, &le) && le.Err == cerr.(*ListError).Err) {
			err = cerr
		}
	}
	return w.listing, err
}

// walk carries the state shared by the format walkers.
type walk struct {
	ctx     context.Context
	format  Format
	lim     Limits
	listing Listing
	seen    int // entries seen, for cancellation checks
	// nameBytes is the bytes of the names listed (Path and Raw).
	nameBytes int64
	// escapingLinks are the paths of links listed so far whose target is
	// outside the root (at most one per entry, so bounded like Entries).
	escapingLinks map[string]bool
	// zipDisagree counts zip entries whose local header disagrees with
	// the central directory; the first is named in Suspicious.
	zipDisagree int
	zipBuf      []byte          // a local header and its name, reused
	zipScan     []byte          // what a salvage scan reads through, reused
	zipNames    map[string]bool // the zip entries' paths listed so far
	// zipDuplicate is set once a zip entry's path is listed twice.
	zipDuplicate bool
	// zipCRC is what checking zip entries' CRC-32s reuses.
	zipCRC zipCRC
	// zipFirst is the offset of the lowest local header listed in a
	// single zip or byte split, -1 before any.
	zipFirst int64
	// zipSpans are the local records of the zip entries listed.
	zipSpans []zipSpan
	// deadline is when MaxDuration ends on the clock now.
	deadline time.Time
	// shown, when set, is shown a compressed tar's bytes as they are read.
	shown *seer
	now   func() time.Time
}

// suspect records something the archive's structure lies about.
func (w *walk) suspect(what string) {
	if !slices.Contains(w.listing.Suspicious, what) {
		w.listing.Suspicious = append(w.listing.Suspicious, what)
	}
}

// full reports whether MaxEntries entries are listed.
func (w *walk) full() bool { return len(w.listing.Entries) >= w.lim.MaxEntries }

// maxRawName bounds Entry.Raw.
const maxRawName = 64 << 10

// add records one entry from its raw stored name.
func (w *walk) add(rawName string, size int64, dir bool) *Entry {
	if dir {
		// zip and tar end directory names with '/', RAR and 7z do not: store one form.
		rawName = strings.TrimSuffix(rawName, "/")
	}
	c := cleanPath(rawName, w.lim.MaxPathBytes)
	e := Entry{Path: c.path, Size: size, Dir: dir, Unsafe: c.cleaned || c.escapes,
		Cleaned: c.cleaned, Cut: c.cut, Bidi: c.bidi, ZeroWidth: c.zero}
	if c.cleaned || c.cut {
		e.Raw = rawName[:min(len(rawName), maxRawName)]
	}
	if len(w.escapingLinks) > 0 && throughLink(e.Path, w.escapingLinks) {
		e.LinkEscape, e.Unsafe = true, true
	}
	w.nameBytes += int64(len(e.Path) + len(e.Raw))
	w.listing.Entries = append(w.listing.Entries, e)
	return &w.listing.Entries[len(w.listing.Entries)-1]
}

// link marks e, a link to target, and records it when the target lies
// outside the extraction root, so that entries written through it are
// flagged too.
func (w *walk) link(e *Entry, target string) {
	if !linkEscapes(e.Path, target) {
		return
	}
	e.LinkEscape, e.Unsafe = true, true
	if w.escapingLinks == nil {
		w.escapingLinks = map[string]bool{}
	}
	w.escapingLinks[e.Path] = true
}

// checkCtx returns a *ListError when ctx is done. It looks at ctx only every
// 256 calls because walks call it once per entry.
func (w *walk) checkCtx() error {
	w.seen++
	if w.seen&255 != 0 {
		return nil
	}
	return w.ctxErr()
}

func (w *walk) ctxErr() error {
	switch err := w.stopCause(); {
	case err == nil:
		return nil
	case err == errTimeBound:
		return &ListError{Format: w.format, Err: ErrLimit,
			Reason: fmt.Sprintf("listing stopped at the %s time bound after %d entries", w.lim.MaxDuration, len(w.listing.Entries))}
	default:
		return &ListError{Format: w.format, Reason: "listing interrupted: " + err.Error(), Err: err}
	}
}

// errTimeBound is stopCause's answer once MaxDuration has passed.
var errTimeBound = errors.New("listing time bound passed")

// stopCause returns why the walk must stop now: the context's error, or
// errTimeBound; nil to go on.
func (w *walk) stopCause() error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if w.now().After(w.deadline) {
		return errTimeBound
	}
	return nil
}

// readErr turns a read error into a *ListError: cut-short input is malformed,
// anything else is an I/O failure of the local parts.
func (w *walk) readErr(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return malformed(w.format, "truncated %s", what)
	}
	if cerr := w.ctxErr(); cerr != nil {
		return cerr
	}
	return &ListError{Format: w.format, Reason: fmt.Sprintf("read %s: %v", what, err), Err: err}
}

// partSet presents the parts of a set as one io.ReaderAt, in order: a
// multipart set is the plain concatenation of its parts for every scheme
// (zip split offsets are per part, which listZip accounts for with Start).
type partSet struct {
	readers []io.ReaderAt
	starts  []int64 // starts[i] is the offset of part i; starts[len(readers)] is the total size
	closers []io.Closer
}

func openParts(paths []string) (*partSet, error) {
	p := &partSet{starts: make([]int64, 1, len(paths)+1)}
	for i, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("open part %d: %w", i+1, err)
		}
		p.closers = append(p.closers, f)
		st, err := f.Stat()
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("stat part %d: %w", i+1, err)
		}
		p.add(f, st.Size())
	}
	return p, nil
}

// newPartSet returns an empty set to add in-memory parts to.
func newPartSet() *partSet { return &partSet{starts: []int64{0}} }

// add appends a part of the given size.
func (p *partSet) add(r io.ReaderAt, size int64) {
	p.readers = append(p.readers, r)
	p.starts = append(p.starts, p.starts[len(p.starts)-1]+size)
}

// from returns the bytes of the set from off on as a set of one part.
func (p *partSet) from(off int64) *partSet {
	q := newPartSet()
	q.add(io.NewSectionReader(p, off, p.Size()-off), p.Size()-off)
	return q
}

// Close closes every opened part file.
func (p *partSet) Close() error {
	var errs []error
	for _, c := range p.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Len is the number of parts.
func (p *partSet) Len() int { return len(p.readers) }

// Size is the total size of the concatenated parts.
func (p *partSet) Size() int64 { return p.starts[len(p.readers)] }

// Start is the offset of part i in the concatenation.
func (p *partSet) Start(i int) int64 { return p.starts[i] }

// PartAt is the index of the part that holds offset off of the
// concatenation (the last part for an offset at or past the end).
func (p *partSet) PartAt(off int64) int {
	for i := 1; i < len(p.readers); i++ {
		if off < p.starts[i] {
			return i - 1
		}
	}
	return len(p.readers) - 1
}

// Part returns part i as its own reader and its size.
func (p *partSet) Part(i int) (io.ReaderAt, int64) { return p.readers[i], p.starts[i+1] - p.starts[i] }

// ReadAt reads the concatenation of the parts.
func (p *partSet) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	n := 0
	for n < len(b) {
		pos := off + int64(n)
		if pos >= p.Size() {
			return n, io.EOF
		}
		// The part holding pos: the first whose end is beyond it.
		i := sort.Search(len(p.readers), func(i int) bool { return p.starts[i+1] > pos })
		end := min(int64(len(b)), int64(n)+p.starts[i+1]-pos)
		want := b[n:end]
		m, err := p.readers[i].ReadAt(want, pos-p.starts[i])
		n += m
		if err != nil && !(errors.Is(err, io.EOF) && m == len(want)) {
			if errors.Is(err, io.EOF) {
				// The file shrank since Stat: treat as cut short.
				return n, io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}
