package archive

import (
	"cmp"
	"fmt"
	"slices"
)

// What a zip's layout hides, found once its directory is listed: flagged
// Suspicious, never fatal.

// zipSpan is the bytes of one entry's local record: its header, name,
// extra block and data (a data descriptor after it left out).
type zipSpan struct{ start, end int64 }

// zipOverlaps flags entries whose local records share bytes: one entry's
// data holding another's header, or several directory entries naming one
// record. That is the overlapping-files zip bomb, whose entries each agree
// with their headers and CRC-32s while their sizes add up to far more
// than the file. The spans are those of the entries listed (at most
// MaxEntries).
func (w *walk) zipOverlaps() {
	s := w.zipSpans
	if len(s) < 2 {
		return
	}
	slices.SortFunc(s, func(a, b zipSpan) int { return cmp.Compare(a.start, b.start) })
	n, end := 0, s[0].end
	for _, x := range s[1:] {
		if x.start < end {
			n++
		}
		end = max(end, x.end)
	}
	if n > 0 {
		w.suspect(fmt.Sprintf("%d entries overlap the bytes of another entry (an overlapping-files zip bomb)", n))
	}
}

// zipPrefix flags bytes before a single zip's (or a byte split's) first
// local header that are no executable stub (a self-extractor's) and no
// split zip's marker: a reader from the front sees another file there.
// A listing cut by MaxEntries may not have met the first header.
func (w *walk) zipPrefix(src *partSet) {
	if w.zipFirst <= 0 || w.listing.SFX || w.listing.Truncated {
		return
	}
	if w.zipFirst == 4 && (zipSigAt(src, 0, zipSpanSig) || zipSigAt(src, 0, zipSpanTempSig)) {
		return
	}
	w.suspect(fmt.Sprintf("%d bytes before the archive's first entry", w.zipFirst))
}
