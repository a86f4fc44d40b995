package ingest

import (
	"context"
	"errors"

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

// verification is what a listing says of the archive's structure.
func verification(l archive.Listing, listErr error) store.Verification {
	v := store.Verification{Verified: listErr == nil, NameLied: l.NameLied, Suspicious: l.Suspicious}
	if listErr != nil && errors.Is(listErr, archive.ErrMalformed) {
		v.Broken = listErr.Error()
	}
	return v
}

// recordVerification records what the listing of package pkg found.
func (p *Pipeline) recordVerification(ctx context.Context, pkg int64, l archive.Listing, listErr error) error {
	return p.store.SetVerification(ctx, pkg, verification(l, listErr))
}
