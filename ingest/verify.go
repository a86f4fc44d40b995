package ingest

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"stashd/archive"
	"stashd/store"
	"stashd/tg"
)

// This file holds what the bytes say beside what the names say: a file of
// no bytes is no archive, and a package's listing records whether its
// archive verified to its end, whether its name lied about its format,
// and what its structure lies about.

// emptyDocument reports whether msg carries a document of no bytes: never
// an archive, whatever its name.
func emptyDocument(msg tg.Message) bool {
	return msg.Document != nil && msg.Document.File.Size == 0
}

// maxSniffed bounds the documents whose names say nothing that are
// downloaded to look at their bytes.
const maxSniffed = 256 << 20

// sniffed reports whether msg's document, not an archive by its name,
// may be one by its bytes: a name without extension, or an executable or
// raw-data extension (a self-extractor, a .bin holding a tar.lz4). Its
// bytes decide, once downloaded.
func sniffed(msg tg.Message) bool {
	d := msg.Document
	if d == nil || d.File.Size <= 0 || d.File.Size > maxSniffed {
		return false
	}
	name := strings.ToLower(filepath.Base(strings.ReplaceAll(d.FileName, `\`, "/")))
	ext := filepath.Ext(name)
	if ext == name { // ".hidden"
		ext = ""
	}
	return slices.Contains([]string{"", ".exe", ".bin", ".sfx", ".dat"}, ext)
}

// notArchive reports whether a document taken for an archive only for a
// look at its bytes (format FormatNone) turned out to be none.
func notArchive(format archive.Format, l archive.Listing) bool {
	return format == archive.FormatNone && l.Format == archive.FormatNone
}

// verification is what a listing says of the archive's structure.
func verification(l archive.Listing, listErr error) store.Verification {
	v := store.Verification{Verified: listErr == nil, NameLied: l.NameLied, Suspicious: l.Suspicious}
	if listErr != nil && errors.Is(listErr, archive.ErrMalformed) {
		v.Broken = listErr.Error()
	}
	return v
}

// BrokenReason begins the reason of a dead letter for a broken archive.
const BrokenReason = "broken archive"

// BrokenArchiveError is a package whose archive failed verification (a
// damaged or cut-short archive): with Config.DeadLetterBroken it is
// dead-lettered with the listing's reason, never delivered. It is
// permanent: the same bytes fail the same way.
type BrokenArchiveError struct {
	// Reason is the listing error.
	Reason string
}

func (e *BrokenArchiveError) Error() string { return fmt.Sprintf("%s: %s", BrokenReason, e.Reason) }

// Unwrap makes the error permanent for tg.Classify.
func (e *BrokenArchiveError) Unwrap() error { return tg.Permanent(errors.New(e.Reason)) }

// brokenArchive returns the error that keeps a broken archive from being
// delivered, nil when it may be: it verified, its failure is not damage
// (a limit, an unsupported feature), or DeadLetterBroken is off.
func (p *Pipeline) brokenArchive(listErr error) error {
	if !p.cfg.DeadLetterBroken || listErr == nil || !errors.Is(listErr, archive.ErrMalformed) {
		return nil
	}
	return &BrokenArchiveError{Reason: listErr.Error()}
}
