package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"stashd/archive"
	"stashd/store"
	"stashd/tg"
)

// catalogue writes a new package made of parts with everything that
// goes with it (its parts, listing and verification, its links to the
// packages it repacks or contains, the deliveries it owes: layer 6, and
// the records of its parts' messages) and releases locks, the package's
// locks the caller holds, in the same commit: one unit of the store's
// group commit (store.CataloguePackage). All of it commits or none, so a
// crash at any point leaves the messages unhandled and the next attempt
// finds nothing of the package, or finds it all. Unless hashLocked (the
// caller holds the content hash's lock among locks), it fails with
// store.ErrHashTaken, having written nothing, if the hash is another
// package's.
func (p *Pipeline) catalogue(ctx context.Context, parts []tg.Message, format archive.Format, name string, uniq []string,
	hashed fetched, listing archive.Listing, listErr error, hashLocked bool, locks ...*store.Lock) (store.Outcome, error) {
	start := time.Now()
	pkg := store.Package{
		ContentHash: hashed.content, Name: name, Format: string(format), TotalSize: hashed.size,
		PartCount: len(parts), FileCount: len(listing.Entries), ListingTruncated: listing.Truncated,
		Origin: parts[0].Key(), OriginTopic: parts[0].TopicID(),
	}
	if listErr != nil {
		pkg.ListingError = listErr.Error()
	}
	pkg.Encrypted, pkg.HeadersEncrypted = listing.Encrypted, listing.HeadersEncrypted
	if listing.Format != "" && listing.Format != format && format != albumFormat {
		// The name lied; the bytes were listed as what they are.
		pkg.Format, pkg.DetectedFormat = string(listing.Format), string(listing.Format)
	}
	n := store.NewPackage{Package: pkg, Verification: verification(listing, listErr), Release: locks, HashUnlocked: !hashLocked,
		Parts: make([]store.Part, len(parts)), Files: make([]store.FileEntry, len(listing.Entries))}
	for i, m := range parts {
		n.Parts[i] = store.Part{Index: i, FileName: m.Document.FileName, Size: hashed.sizes[i],
			SHA256: hashed.parts[i], UniqueID: uniq[i], Source: m.Key()}
	}
	for i, e := range listing.Entries {
		n.Files[i] = fileEntry(e)
	}
	// The same content in another container, catalogued already: linked
	// to it and, by default, not delivered again.
	rp, err := p.findRepack(ctx, listing, listErr)
	if err != nil {
		return "", err
	}
	if rp.lock != nil {
		defer rp.lock.Unlock() // when the commit did not release it
		n.Signature, n.SignatureChecked, n.RepackOf, n.Release = rp.sig, rp.checked, rp.of, append(n.Release, rp.lock)
	}
	out, recordAs := store.OutcomePackage, int64(0) // 0: this package
	switch rp.action {
	case "", RepackDelivered:
		n.Deliveries = p.deliveriesOwed(0, parts)
	case RepackLinked:
		out, recordAs = store.OutcomeDuplicate, rp.of
	}
	n.Sources = make([]store.SourceMessage, len(parts))
	for i, m := range parts {
		n.Sources[i] = sourceMessage(m, out, recordAs)
	}
	got, err := p.store.CataloguePackage(ctx, n)
	p.m.observeStage(StageCatalogue, start)
	if err != nil {
		return "", err
	}
	p.forget(parts)
	rp.counted(p, got.ID)
	queued := 0
	for _, w := range n.Deliveries {
		if slices.Contains(got.Queued, w.Destination) {
			w.PackageID = got.ID
			p.deliveryQueued(w, parts)
			queued++
		}
	}
	if queued > 0 {
		p.wakeDelivery()
	}
	if listErr != nil {
		p.log.Debug("archive listing failed; package mirrored anyway", "package", got.ID, "name", name, "err", listErr)
	}
	return out, nil
}

// finishDuplicate links parts to an existing package, queueing the
// deliveries it still owes as parts' source posted it (an earlier attempt
// cut short, or routes that send this source elsewhere). newUnique, when
// set, are unique ids of an identical re-upload to remember for layer 2.
// Queueing is idempotent (one row per package and destination), so it
// needs no lock of the package's own.
func (p *Pipeline) finishDuplicate(ctx context.Context, parts []tg.Message, id int64, newUnique []string) (store.Outcome, error) {
	if newUnique != nil {
		if err := p.store.AddRemoteFiles(ctx, id, newUnique); err != nil {
			return "", err
		}
	}
	pkg, err := p.store.GetPackage(ctx, id)
	if err != nil {
		return "", err
	}
	if pkg.PartCount != len(parts) {
		// Same bytes cut differently: the package is known, but these parts
		// cannot stand in for its parts when sending. Link only.
		return store.OutcomeDuplicate, p.record(ctx, parts, store.OutcomeDuplicate, id)
	}
	if skip, err := p.skippedRepack(ctx, id); err != nil {
		return "", err
	} else if skip {
		return store.OutcomeDuplicate, p.record(ctx, parts, store.OutcomeDuplicate, id)
	}
	if _, err := p.handOff(ctx, pkg, parts); err != nil {
		return "", err
	}
	out := store.OutcomeDuplicate
	if pkg.Origin == parts[0].Key() {
		// The package's own source, back after an attempt that stopped
		// between cataloguing and recording.
		out = store.OutcomePackage
	}
	return out, p.record(ctx, parts, out, id)
}

// errPackageUnfinished is the retryable error for some of a package's
// files gathered while that package's delivery is not finished. They are
// retried with their set (the rest of the package's messages usually join
// it and the package is delivered whole), then as dead letters, until the
// package's delivery is complete.
var errPackageUnfinished = errors.New("some of the parts of a package whose delivery is not finished")

// finishPartsOf records parts, some of package id's files, as duplicates
// of it once its delivery is complete. They are what a set or album
// re-gathered short after a restart looks like (the rest of its messages
// recorded, or not found again yet), or a forward of some of an album's
// documents.
func (p *Pipeline) finishPartsOf(ctx context.Context, parts []tg.Message, id int64) (store.Outcome, error) {
	done, err := p.partDelivered(ctx, id, parts[0])
	if err != nil {
		return "", err
	}
	if !done {
		return "", fmt.Errorf("%d files of package %d: %w", len(parts), id, errPackageUnfinished)
	}
	return store.OutcomeDuplicate, p.record(ctx, parts, store.OutcomeDuplicate, id)
}

// record records parts as handled with outcome out (of package pkg) and
// resolves their dead letters, in one commit.
func (p *Pipeline) record(ctx context.Context, parts []tg.Message, out store.Outcome, pkg int64) error {
	msgs := make([]store.SourceMessage, len(parts))
	for i, m := range parts {
		msgs[i] = sourceMessage(m, out, pkg)
	}
	if err := p.store.RecordHandled(ctx, msgs...); err != nil {
		return err
	}
	p.forget(parts)
	return nil
}

// fileEntry is the catalogue row of a listed entry.
func fileEntry(e archive.Entry) store.FileEntry {
	f := store.FileEntry{Path: e.Path, Size: e.Size, Dir: e.Dir, Unsafe: e.Unsafe, Raw: e.Raw, CRC: e.CRC, HasCRC: e.HasCRC}
	for _, fl := range []struct {
		on   bool
		name string
	}{
		{e.Cleaned, store.FlagCleaned},
		{e.Cut, store.FlagCut},
		{e.Bidi, store.FlagBidi},
		{e.LinkEscape, store.FlagLinkEscape},
		{e.Encrypted, store.FlagEncrypted},
		{e.ZeroWidth, store.FlagZeroWidth},
	} {
		if fl.on {
			f.Flags = append(f.Flags, fl.name)
		}
	}
	return f
}
