package ingest

import (
	"context"
	"encoding/hex"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive"
	"stashd/store"
)

// This file recognises the same content in another container: a package
// whose files (paths, sizes, CRCs) are a catalogued package's, in other
// archive bytes (zip to 7z, recompressed, split differently), is linked to
// the first as its repack and, by default, not delivered again.

// The actions taken on a repack, as stashd_repacks_total labels them.
const (
	RepackSkipped   = "skipped"
	RepackDelivered = "delivered"
)

func newRepackMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stashd_repacks_total",
		Help: "Packages recognised as repacks of catalogued packages (same files, other archive bytes), by account and action (skipped, delivered).",
	}, []string{"account", "action"})
}

// linkRepack records package pkg's content signature and, when a
// catalogued package holds the same files, links pkg to it as a repack.
// skip is true when the repack must not be delivered (Repacks "skip" or
// "link"). A package whose listing failed or whose entries record no CRC
// is never a repack.
func (p *Pipeline) linkRepack(ctx context.Context, pkg int64, l archive.Listing, listErr error) (skip bool, err error) {
	if listErr != nil || l.Truncated {
		return false, nil
	}
	sig, ok := archive.ContentSignature(l.Entries)
	if !ok {
		return false, nil
	}
	// Two repacks of one content catalogued at once must not both miss
	// each other: one at a time per signature, the first to record it is
	// the one the others link to.
	lock, err := p.store.Lock(ctx, "sig:"+hex.EncodeToString(sig))
	if err != nil {
		return false, err
	}
	defer lock.Unlock()
	if err := p.store.SetContentSignature(ctx, pkg, sig); err != nil {
		return false, err
	}
	first, found, err := p.store.PackageBySignature(ctx, sig, pkg)
	if err != nil || !found {
		return false, err
	}
	if err := p.store.LinkPackages(ctx, pkg, first, store.LinkRepack); err != nil {
		return false, err
	}
	skip = p.cfg.Repacks != "deliver"
	action := RepackSkipped
	if !skip {
		action = RepackDelivered
	}
	if p.m != nil {
		p.m.repacks.WithLabelValues(p.cfg.Account, action).Inc()
	}
	p.log.Info("repack of a catalogued package", "package", pkg, "repack_of", first, "action", action)
	return skip, nil
}

// skippedRepack reports whether package pkg is a repack that must not be
// delivered: a later message carrying it (a forward, a rescan) must not
// deliver it either.
func (p *Pipeline) skippedRepack(ctx context.Context, pkg int64) (bool, error) {
	if p.cfg.Repacks == "deliver" {
		return false, nil
	}
	return p.store.IsRepack(ctx, pkg)
}
