package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"stashd/internal/service"
	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// BackfillStore is what route backfills read and write.
type BackfillStore interface {
	EnsureBackfill(ctx context.Context, key, account, name string) (store.Backfill, bool, error)
	BackfillPackages(ctx context.Context, b store.Backfill, limit int) ([]store.Package, error)
	AdvanceBackfill(ctx context.Context, b store.Backfill, pkg int64, step store.BackfillStep) error
	FinishBackfill(ctx context.Context, b store.Backfill) error
	PartSources(ctx context.Context, pkg int64) ([]tg.MessageKey, error)
	GetPackage(ctx context.Context, id int64) (store.Package, error)
}

// BackfillConfig configures a Backfiller.
type BackfillConfig struct {
	// Rate is the most matching packages per minute one account's
	// backfills deliver (each costs a getMessage per part and the sends);
	// packages the route does not match cost nothing. Zero means 30.
	Rate float64
	// Batch is how many packages are read from the catalogue at a time;
	// zero means 100.
	Batch int
	// Interval between looks for unfinished backfills; zero means 1 min.
	Interval time.Duration
}

// Backfiller delivers packages catalogued before a route existed to that
// route's destinations: one walk per route and account over the packages
// whose origin the account watches, at a bounded rate, resumable from its
// cursor after a restart. A route removed from the configuration is simply
// no longer walked; nothing is ever deleted.
type Backfiller struct {
	cfg   BackfillConfig
	p     *Pipeline
	store BackfillStore
	lim   *rate.Limiter
	run   service.Runner
}

// NewBackfiller returns the backfill loop of p's account, over p's routes.
func NewBackfiller(cfg BackfillConfig, p *Pipeline, st BackfillStore) *Backfiller {
	cfg.Rate = cmp.Or(cfg.Rate, 30)
	cfg.Batch = cmp.Or(cfg.Batch, 100)
	cfg.Interval = cmp.Or(cfg.Interval, time.Minute)
	return &Backfiller{cfg: cfg, p: p, store: st, lim: rate.NewLimiter(rate.Limit(cfg.Rate/60), 1)}
}

// Ensure records every current route the account has not walked yet, with
// the packages catalogued so far as its walk. Call it before ingest starts,
// so that the walk ends where routing at ingest takes over.
func (b *Backfiller) Ensure(ctx context.Context) error {
	for i, rt := range b.p.cfg.Routes.Routes() {
		bf, started, err := b.store.EnsureBackfill(ctx, rt.Key(), b.p.cfg.Account, label(rt, i))
		if err != nil {
			return err
		}
		if started && !bf.Done() {
			b.p.log.Info("route is new: backfilling the packages catalogued before it", "route", bf.Name, "upto", bf.Upto)
		}
	}
	return nil
}

func label(rt route.Route, i int) string { return rt.Title(i) }

// Start records new routes (Ensure) and then walks their backfills.
func (b *Backfiller) Start(ctx context.Context) error {
	if !b.p.cfg.Routes.Routed() {
		return nil
	}
	if err := b.Ensure(ctx); err != nil {
		return err
	}
	return b.run.StartFunc(ctx, func(ctx context.Context) {
		service.Every(ctx, b.cfg.Interval, nil, func(ctx context.Context) {
			res, err := b.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				b.p.log.Warn("route backfill", "err", err)
			}
			if res.Walked > 0 {
				b.p.log.Info("route backfill", "walked", res.Walked, "matched", res.Matched, "delivered", res.Delivered, "failed", res.Failed)
			}
		})
	})
}

// Stop stops the loop.
func (b *Backfiller) Stop() { b.run.Stop() }

// BackfillResult counts what one RunOnce did.
type BackfillResult struct {
	Walked, Matched, Delivered, Failed int
}

// RunOnce walks every unfinished backfill of the account's current routes
// to its end, or until ctx ends or a retryable error stops it (the cursor
// stays before the package that failed).
func (b *Backfiller) RunOnce(ctx context.Context) (BackfillResult, error) {
	var res BackfillResult
	for i, rt := range b.p.cfg.Routes.Routes() {
		bf, _, err := b.store.EnsureBackfill(ctx, rt.Key(), b.p.cfg.Account, label(rt, i))
		if err != nil {
			return res, err
		}
		for !bf.Done() {
			pkgs, err := b.store.BackfillPackages(ctx, bf, b.cfg.Batch)
			if err != nil {
				return res, err
			}
			for _, pkg := range pkgs {
				step, err := b.one(ctx, rt, pkg)
				if err != nil {
					return res, fmt.Errorf("backfill route %s with package %d: %w", bf.Name, pkg.ID, err)
				}
				if err := b.store.AdvanceBackfill(ctx, bf, pkg.ID, step); err != nil {
					return res, err
				}
				bf.Cursor = pkg.ID
				res.Walked++
				res.Matched += count(step.Matched)
				res.Delivered += count(step.Delivered)
				res.Failed += count(step.Failed)
			}
			if len(pkgs) < b.cfg.Batch || bf.Cursor >= bf.Upto {
				if err := b.store.FinishBackfill(ctx, bf); err != nil {
					return res, err
				}
				b.p.log.Info("route backfill finished", "route", bf.Name)
				break
			}
		}
	}
	return res, nil
}

func count(v bool) int {
	if v {
		return 1
	}
	return 0
}

// one delivers pkg to where the routes send it now, if rt matches it as
// its origin posted it. A permanent failure (the origin message gone, the
// source lost) is counted and the walk goes on; a retryable one stops it.
func (b *Backfiller) one(ctx context.Context, rt route.Route, pkg store.Package) (store.BackfillStep, error) {
	in := route.Package{Chat: pkg.Origin.Chat, Topic: pkg.OriginTopic, Name: pkg.Name, Size: pkg.TotalSize}
	if !rt.Matches(in) {
		return store.BackfillStep{}, nil
	}
	step := store.BackfillStep{Matched: true}
	if err := b.lim.Wait(ctx); err != nil {
		return step, err
	}
	n, err := b.redeliver(ctx, pkg)
	switch {
	case err == nil:
		step.Delivered = n > 0
		return step, nil
	case ctx.Err() == nil && tg.Classify(err) == tg.ClassPermanent:
		b.p.log.Warn("route backfill: package cannot be delivered", "package", pkg.ID, "err", err)
		step.Failed, step.Err = true, err.Error()
		return step, nil
	}
	return step, err
}

// redeliver fetches pkg's parts from its origin and queues the deliveries
// the routes now give it, like ingest does.
func (b *Backfiller) redeliver(ctx context.Context, pkg store.Package) (int, error) {
	keys, err := b.store.PartSources(ctx, pkg.ID)
	if err != nil {
		return 0, err
	}
	if len(keys) == 0 {
		return 0, tg.Permanent(errors.New("package has no parts"))
	}
	parts := make([]tg.Message, len(keys))
	for i, k := range keys {
		m, err := b.p.loadPart(ctx, pkg.ID, i, k, nil)
		if err != nil {
			return 0, err
		}
		parts[i] = m
	}
	return b.p.handOff(ctx, pkg, parts)
}
