package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"stashd/archive"
	"stashd/store"
	"stashd/tg"
)

// catalogue writes a new package (its parts and listing) made of parts,
// then hands its deliveries to the delivery stage's queue and records the
// parts' messages. The caller holds the package's locks.
func (p *Pipeline) catalogue(ctx context.Context, parts []tg.Message, format archive.Format, name string, uniq []string,
	hashed fetched, listing archive.Listing, listErr error) (store.Outcome, error) {
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
	storeParts := make([]store.Part, len(parts))
	for i, m := range parts {
		storeParts[i] = store.Part{Index: i, FileName: m.Document.FileName, Size: hashed.sizes[i],
			SHA256: hashed.parts[i], UniqueID: uniq[i], Source: m.Key()}
	}
	files := make([]store.FileEntry, len(listing.Entries))
	for i, e := range listing.Entries {
		files[i] = fileEntry(e)
	}
	id, _, err := p.store.CreatePackage(ctx, pkg, storeParts, files)
	p.m.observeStage(StageCatalogue, start)
	if err != nil {
		return "", err
	}
	pkg.ID = id
	if err := p.recordVerification(ctx, id, listing, listErr); err != nil {
		return "", err
	}
	// The same content in another container, catalogued already: linked
	// to it and, by default, not delivered again.
	switch action, first, err := p.linkRepack(ctx, id, listing, listErr); {
	case err != nil:
		return "", err
	case action == RepackSkipped:
		return store.OutcomePackage, p.record(ctx, parts, store.OutcomePackage, id)
	case action == RepackLinked:
		return store.OutcomeDuplicate, p.record(ctx, parts, store.OutcomeDuplicate, first)
	}

	// Layer 6: hand the deliveries to the delivery stage's queue, then
	// record the sources. Recording last means a crash before it leaves
	// the message unhandled, and the next attempt finds the package
	// (layer 2) and queues what is missing.
	if _, err := p.handOff(ctx, pkg, parts); err != nil {
		return "", err
	}
	if listErr != nil {
		p.log.Debug("archive listing failed; package mirrored anyway", "package", id, "name", name, "err", listErr)
	}
	return store.OutcomePackage, p.record(ctx, parts, store.OutcomePackage, id)
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

func (p *Pipeline) record(ctx context.Context, parts []tg.Message, out store.Outcome, pkg int64) error {
	msgs := make([]store.SourceMessage, len(parts))
	for i, m := range parts {
		msgs[i] = sourceMessage(m, out, pkg)
	}
	if err := p.store.RecordMessages(ctx, msgs...); err != nil {
		return err
	}
	for _, m := range parts {
		if err := p.store.ResolveDeadLetter(ctx, m.Key()); err != nil {
			return err
		}
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
