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

// The actions taken on a repack, as stashd_repacks_total labels them;
// Config.Repacks chooses: "skip" (the default) skips, "deliver" delivers,
// "link" links.
const (
	// RepackSkipped: catalogued as a package of its own, linked to the
	// package it repacks, sent nowhere.
	RepackSkipped = "skipped"
	// RepackDelivered: linked, and delivered like any package.
	RepackDelivered = "delivered"
	// RepackLinked: linked, sent nowhere, and its post recorded as a copy
	// of the package it repacks (outcome duplicate of that package), so
	// the post reads as that package's content wherever stashd shows it.
	RepackLinked = "linked"
)

func newRepackMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stashd_repacks_total",
		Help: "Packages recognised as repacks of catalogued packages (same files, other archive bytes), by account and action (skipped, delivered, linked).",
	}, []string{"account", "action"})
}

// linkRepack records package pkg's content signature and, when a
// catalogued package holds the same files, links pkg to it as a repack
// and returns that package and the action Config.Repacks chooses
// (RepackSkipped, RepackDelivered, RepackLinked); action is "" when pkg is
// no repack. A package whose listing failed or whose entries record no
// CRC is never a repack.
func (p *Pipeline) linkRepack(ctx context.Context, pkg int64, l archive.Listing, listErr error) (action string, first int64, err error) {
	if listErr != nil || l.Truncated {
		return "", 0, nil
	}
	sig, ok := archive.ContentSignature(l.Entries)
	if !ok {
		return "", 0, nil
	}
	// Two repacks of one content catalogued at once must not both miss
	// each other: one at a time per signature, the first to record it is
	// the one the others link to.
	lock, err := p.store.Lock(ctx, "sig:"+hex.EncodeToString(sig))
	if err != nil {
		return "", 0, err
	}
	defer lock.Unlock()
	if err := p.store.SetContentSignature(ctx, pkg, sig); err != nil {
		return "", 0, err
	}
	// Some of another package's files, or another's all and more: both
	// are delivered, the link says so. A repack is linked too, so that
	// containment shows whichever copy of the content is looked at.
	if n, err := p.store.LinkContainment(ctx, pkg); err != nil {
		return "", 0, err
	} else if n > 0 {
		p.log.Debug("package contains or is contained in catalogued packages", "package", pkg, "links", n)
	}
	first, found, err := p.store.PackageBySignature(ctx, sig, pkg)
	if err != nil || !found {
		return "", 0, err
	}
	if err := p.store.LinkPackages(ctx, pkg, first, store.LinkRepack); err != nil {
		return "", 0, err
	}
	action = RepackSkipped
	switch p.cfg.Repacks {
	case "deliver":
		action = RepackDelivered
	case "link":
		action = RepackLinked
	}
	if p.m != nil {
		p.m.repacks.WithLabelValues(p.cfg.Account, action).Inc()
	}
	p.log.Info("repack of a catalogued package", "package", pkg, "repack_of", first, "action", action)
	return action, first, nil
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
