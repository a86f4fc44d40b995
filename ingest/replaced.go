package ingest

import (
	"context"
	"fmt"

	"stashd/tg"
)

// checkStillCarries makes sure m, a part of package pkg fetched again from
// its source, still carries one of the package's files. An edit may have put
// another document in the message since the package was catalogued; sending
// that would record other bytes as this package. The new document is a
// package of its own (ingested from the edit); this one is gone from its
// source, which is final.
func (p *Pipeline) checkStillCarries(ctx context.Context, pkg int64, part int, m tg.Message) error {
	if m.Document == nil {
		return tg.Permanent(fmt.Errorf("part %d of package %d (%s) is no document any more", part, pkg, m.Key()))
	}
	holder, ok, err := p.store.PackageOfPart(ctx, m.Document.File.UniqueID)
	if err != nil {
		return err
	}
	if !ok || holder != pkg {
		return tg.Permanent(fmt.Errorf("part %d of package %d (%s) was replaced at source by another document", part, pkg, m.Key()))
	}
	return nil
}
