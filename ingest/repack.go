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
// the first as its repack and, by default, not delivered again. Only a
// first package whose CRCs the listing checked against its bytes
// (archive.SignatureChecked) is trusted that far: a repack of one whose
// CRCs are its headers' claim is linked and delivered.

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

// repack is what a new package's listing says of it among the catalogued
// packages.
type repack struct {
	// sig is the listing's content signature, nil when it has none (a
	// listing that failed or was cut short, or entries without CRCs).
	sig []byte
	// checked says sig stands on the package's bytes
	// (archive.SignatureChecked).
	checked bool
	// lock is held on the signature until the package is catalogued: two
	// repacks of one content catalogued at once must not both miss each
	// other, so one at a time per signature, and the first to record it
	// is the one the others link to.
	lock *store.Lock
	// of is the catalogued package with the same signature, 0 when none;
	// action is what Config.Repacks does with the repack then
	// (RepackSkipped, RepackDelivered, RepackLinked), "" when none.
	of     int64
	action string
}

// findRepack takes the lock on a new package's content signature and
// looks, in the same round trip, for a catalogued package holding the
// same files. A package with no signature is no repack, and needs no
// lock. The caller catalogues the package with the signature and the
// link (store.NewPackage), which releases the lock, or unlocks it.
func (p *Pipeline) findRepack(ctx context.Context, l archive.Listing, listErr error) (repack, error) {
	if listErr != nil || l.Truncated {
		return repack{}, nil
	}
	sig, ok := archive.ContentSignature(l.Entries)
	if !ok {
		return repack{}, nil
	}
	var first store.Found
	var firstChecked bool
	lock, err := p.store.LockThen(ctx, "sig:"+hex.EncodeToString(sig), store.LookPackageBySignature(sig, 0, &first, &firstChecked))
	if err != nil {
		return repack{}, err
	}
	r := repack{sig: sig, checked: archive.SignatureChecked(l.Entries), lock: lock}
	if !first.OK {
		return r, nil
	}
	r.of, r.action = first.ID, RepackSkipped
	switch {
	case p.cfg.Repacks == "deliver":
		r.action = RepackDelivered
	case !firstChecked:
		// The first package's signature is what its headers claim, which
		// a fake can copy from the release it imitates: this package is
		// linked to it, and delivered, never suppressed by it.
		r.action = RepackDelivered
		p.log.Info("the package has the files a catalogued package claims, whose CRCs were never checked against its bytes; delivered, not taken as its repack",
			"repack_of", first.ID)
	case p.cfg.Repacks == "link":
		r.action = RepackLinked
	}
	return r, nil
}

// counted counts and logs a repack once its package, pkg, is catalogued.
func (r repack) counted(p *Pipeline, pkg int64) {
	if r.action == "" {
		return
	}
	if p.m != nil {
		p.m.repacks.WithLabelValues(p.cfg.Account, r.action).Inc()
	}
	p.log.Info("repack of a catalogued package", "package", pkg, "repack_of", r.of, "action", r.action)
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
