package ingest

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"stashd/archive"
	"stashd/store"
	"stashd/tg"
)

// This file assembles a set whose parts were posted more than once with
// different bytes (a damaged or truncated copy beside the good one): same
// name, even same size, is not the same part. Every copy is downloaded and
// hashed, archive.Assemble picks the copies that make the set list to its
// end, and the others are recorded as rejected copies with the reason, or
// as duplicates when their bytes are a chosen copy's.

// takenAlone handles pt, a message recorded as a part of a set, as a lone
// archive, as fetchAlone handles a plain x.zip: its bytes, if they are a
// whole archive, are catalogued on their own (or found to be a package's)
// and it reports true; bytes not known to be whole write nothing, and pt
// stays a part. A document replaced since it was recorded stays a part
// too: the sweeps take the edit.
func (p *Pipeline) takenAlone(ctx context.Context, pt store.SourceMessage) (bool, error) {
	m, err := p.message(ctx, pt.Key)
	if err != nil {
		return false, err
	}
	if pt.UniqueID != "" && m.Document.File.UniqueID != pt.UniqueID {
		return false, nil
	}
	_, err = p.fetchAlone(ctx, m, classify(m), &store.Found{}, nil)
	switch {
	case errors.Is(err, errMayBeVolume):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// rejectedPart is a copy of a part left out of its set, and why.
type rejectedPart struct {
	part   store.SourceMessage
	reason string
}

// assembleByContent chooses, among ordered (the first copy posted of each
// part, in set order) and contested (the other copies, by other files),
// the copies that make the set valid. It returns the chosen parts in set
// order, the copies whose bytes are a chosen copy's (duplicates), and the
// copies rejected with the reason. When no choice lists without error the
// one that went furthest is returned: the fetch-and-verify step then
// treats it as any broken set.
func (p *Pipeline) assembleByContent(ctx context.Context, ordered, contested []store.SourceMessage) (
	chosen, dups []store.SourceMessage, rejected []rejectedPart, err error) {
	all := append(append([]store.SourceMessage(nil), ordered...), contested...)
	msgs, err := p.messages(ctx, all)
	if err != nil {
		return nil, nil, nil, err
	}
	held, err := p.holdDisk(ctx, msgs)
	if err != nil {
		return nil, nil, nil, err
	}
	defer held.release()
	// Hashes only: Assemble lists the candidate sets itself.
	got, err := p.fetch(ctx, msgs, archive.FormatNone, held)
	if err != nil {
		return nil, nil, nil, err
	}
	cands := make([]archive.Candidate, len(all))
	for i, pt := range all {
		cands[i] = archive.Candidate{Name: pt.FileName, Path: got.paths[i],
			Hash: hex.EncodeToString(got.parts[i]), Size: got.sizes[i]}
	}
	a := archive.Assemble(ctx, cands, p.cfg.Limits)
	held.release()
	if ctx.Err() != nil {
		return nil, nil, nil, ctx.Err()
	}
	if a.Order == nil {
		// The names alone make the set (orderSet said so) but not with
		// these copies: keep the first posted of each part.
		for _, pt := range contested {
			rejected = append(rejected, rejectedPart{pt, "another copy of " + pt.FileName + " was chosen: " + a.Reason})
		}
		return ordered, nil, rejected, nil
	}
	for _, idx := range a.Order {
		chosen = append(chosen, all[idx])
	}
	for _, r := range a.Rejected {
		if strings.HasPrefix(r.Reason, "same bytes as ") {
			dups = append(dups, all[r.Index])
			continue
		}
		rejected = append(rejected, rejectedPart{all[r.Index], r.Reason})
	}
	if len(rejected) > 0 {
		p.log.Info("set assembled from the copies that make it valid", "set", chosen[0].FileName,
			"parts", len(chosen), "rejected", len(rejected), "verified", a.Verified)
	}
	return chosen, dups, rejected, nil
}

// messages loads the messages of parts, in order.
func (p *Pipeline) messages(ctx context.Context, parts []store.SourceMessage) ([]tg.Message, error) {
	msgs := make([]tg.Message, len(parts))
	for i, pt := range parts {
		m, err := p.message(ctx, pt.Key)
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	return msgs, nil
}

// settleRejectedParts records the copies left out of a set just completed
// as rejected copies of its package, with the reason, and their messages
// as duplicates of it: they are never delivered.
//
// Copies whose names alone make a whole set are no copies: another set
// posted under the set's names (two uploads named alike, or names that
// differ only in case or in invisible characters) before the first was
// swept. They stay pending, and the next sweep, no longer meeting the
// parts just catalogued, assembles them as a set of their own.
func (p *Pipeline) settleRejectedParts(ctx context.Context, setKey string, ordered []store.SourceMessage, rejected []rejectedPart) error {
	if len(rejected) > 1 {
		others := make([]store.SourceMessage, len(rejected))
		for i, r := range rejected {
			others[i] = r.part
		}
		slices.SortFunc(others, func(a, b store.SourceMessage) int { return cmp.Compare(a.Key.Message, b.Key.Message) })
		if _, _, _, missing := orderSet(setKey, others); missing == "" {
			p.log.Info("another set posted under the same names waits for the next sweep", "set", ordered[0].FileName, "parts", len(others))
			return nil
		}
	}
	// A copy whose bytes are a whole archive is no copy: an archive of
	// its own posted under a part's name.
	kept := rejected[:0]
	for _, r := range rejected {
		alone, err := p.takenAlone(ctx, r.part)
		if err != nil {
			return err
		}
		if !alone {
			kept = append(kept, r)
		}
	}
	if rejected = kept; len(rejected) == 0 {
		return nil
	}
	pkg, err := p.setPackage(ctx, ordered)
	if err != nil {
		return err
	}
	msgs := make([]tg.Message, len(rejected))
	for i, r := range rejected {
		if err := p.store.RecordRejected(ctx, r.part.Key, pkg, r.part.FileName, r.reason); err != nil {
			return fmt.Errorf("reject a copy of %q: %w", r.part.FileName, err)
		}
		msgs[i] = partStub(r.part)
	}
	if err := p.record(ctx, msgs, store.OutcomeDuplicate, pkg); err != nil {
		return err
	}
	for range rejected {
		p.count(store.OutcomeDuplicate)
	}
	return nil
}
