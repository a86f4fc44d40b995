package ingest

import (
	"errors"
	"fmt"

	"stashd/archive"
	"stashd/tg"
)

// This file decides from the bytes whether a set whose names look whole
// is: a RAR end block saying another volume follows the last part, a byte
// split whose concatenation stops before its end. The missing volume is
// named as it would be posted.

// volumeMissing returns the IncompleteSetError for parts (in set order)
// whose listing failed with listErr, when the bytes say a volume is
// missing; nil otherwise. A plain x.rar opening x.r00… is a set too.
func volumeMissing(parts []tg.Message, listErr error) *IncompleteSetError {
	if listErr == nil {
		return nil
	}
	names := make([]archive.Name, len(parts))
	multipart := -1
	for i, m := range parts {
		names[i] = archive.ParseName(m.Document.FileName)
		if multipart < 0 && names[i].IsMultipart() {
			multipart = i
		}
	}
	if multipart < 0 {
		return nil
	}
	n := names[multipart]
	cutShort := n.Scheme == archive.SchemeNumbered && errors.Is(listErr, archive.ErrCutShort)
	if !errors.Is(listErr, archive.ErrVolumeMissing) && !cutShort {
		return nil
	}
	next := archive.PartName(names, len(parts)+1)
	return &IncompleteSetError{Set: n.Set, Missing: fmt.Sprintf("%s missing (%s)", next, listErr)}
}

// missingNames turns the part numbers a set lacks into the names they would
// be posted under ("x.r00, x.r02 missing"); reason is kept when names
// cannot say.
func missingNames(names []archive.Name, o archive.SetOrder, reason string) string {
	if len(o.Missing) == 0 && !o.MissingFinal {
		return reason
	}
	var out []string
	for _, p := range o.Missing {
		out = append(out, archive.PartName(names, p))
	}
	if o.MissingFinal {
		out = append(out, o.Set)
	}
	s := out[0]
	for _, x := range out[1:] {
		s += ", " + x
	}
	return s + " missing"
}
