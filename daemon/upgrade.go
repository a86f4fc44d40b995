package daemon

import (
	"context"
	"slices"

	"stashd/internal/service"
	"stashd/store"
	"stashd/tg"
)

// ReasonUpgraded is the dirty reason of the supergroup a watched basic
// group was upgraded to: it is caught up from its start.
const ReasonUpgraded = "upgraded"

// upgradeQueue bounds the upgrades waiting for the follower; upgrades are
// rare, and one dropped is followed at the next start only if another
// update names it, so it is logged.
const upgradeQueue = 64

// upgradeFollower makes an account follow its basic groups upgraded to
// supergroups (tg.ChatUpgraded): the new chat becomes a source of its own,
// opened and caught up from its start, while the old chat keeps its
// watermark and catalogue history. The session pump must never block, so
// it only queues the update; the follower does the store and Telegram
// work on its own goroutine.
type upgradeFollower struct {
	d   *Daemon
	r   *accountRun
	in  chan tg.ChatUpgraded
	run service.Runner
}

func newUpgradeFollower(d *Daemon, r *accountRun) *upgradeFollower {
	return &upgradeFollower{d: d, r: r, in: make(chan tg.ChatUpgraded, upgradeQueue)}
}

// offer queues u without blocking.
func (f *upgradeFollower) offer(u tg.ChatUpgraded) {
	select {
	case f.in <- u:
	default:
		f.r.log.Warn("upgrade queue full: upgrade not followed", "source", u.From, "supergroup", u.To)
	}
}

// Start starts the follower's goroutine.
func (f *upgradeFollower) Start(ctx context.Context) error {
	return f.run.StartFunc(ctx, func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-f.in:
				if err := f.follow(ctx, u); err != nil && ctx.Err() == nil {
					f.r.log.Error("follow upgraded basic group", "source", u.From, "supergroup", u.To, "err", err)
				}
			}
		}
	})
}

// Stop stops the follower and waits for it.
func (f *upgradeFollower) Stop() { f.run.Stop() }

// follow makes every account listing the upgraded group list the
// supergroup too (r.listed): one that reads the group adopts it (the
// store records the supergroup for the group's account); one that does
// not opens it, as it opens every chat it lists, and takes it over as it
// would the group (sharedWatch). Each records the upgrade: the account
// reading the group may not run to see it.
func (f *upgradeFollower) follow(ctx context.Context, u tg.ChatUpgraded) error {
	r := f.r
	f.d.mu.Lock()
	listed, already := slices.Contains(r.listed, u.From), slices.Contains(r.account.Sources, u.To)
	f.d.mu.Unlock()
	if !listed {
		return nil // not a source of this account
	}
	src, err := f.d.store.FollowUpgrade(ctx, u.From, u.To, ReasonUpgraded)
	if err != nil {
		return err
	}
	r.log.Info("source upgraded to a supergroup; following it", "source", u.From, "supergroup", u.To, "account_reading_it", src.Account)
	f.d.mu.Lock()
	if !slices.Contains(r.listed, u.To) {
		r.listed = append(slices.Clip(r.listed), u.To)
	}
	f.d.mu.Unlock()
	switch {
	case already:
		// configured as a source of its own too
	case src.Account == r.name:
		f.d.adopt(ctx, r, src)
	default:
		if _, err := r.views.Open(ctx, u.To); err != nil {
			r.log.Warn("open chat failed", "source", u.To, "err", err)
		}
	}
	return nil
}

// adopt makes src, new to the account while it runs (a supergroup a
// source was upgraded to, a shared source taken over), one of the sources
// it lists and watches, catches up and rescans. It starts
// dirty: catch-up reads it from its watermark. Updates for supergroups
// arrive only for opened chats: a chat this session opened already (a
// shared source, opened at start) is not opened again, TDLib doing
// nothing for an open chat; an open that fails is tried again by the next
// one.
func (d *Daemon) adopt(ctx context.Context, r *accountRun, src store.Source) {
	r.lst.Watch(src)
	d.mu.Lock()
	r.account.Sources = append(slices.Clip(r.account.Sources), src.ChatID)
	r.sources = len(r.account.Sources)
	if !slices.Contains(r.listed, src.ChatID) {
		r.listed = append(slices.Clip(r.listed), src.ChatID)
	}
	d.mu.Unlock()
	if _, err := r.views.Open(ctx, src.ChatID); err != nil {
		r.log.Warn("open chat failed; the source relies on catch-up", "source", src.ChatID, "err", err)
		r.lst.MarkDirty(src.ChatID, "open_failed")
	}
	r.catch.AddSource(src.ChatID)
	r.resc.AddSource(src.ChatID)
}

// followStoredUpgrades adds to sources the supergroups that listed basic
// groups were upgraded to in an earlier run (the configuration may still
// name the old group only), whichever account reads the group.
func followStoredUpgrades(sources []tg.ChatID, upgraded map[tg.ChatID]tg.ChatID) []tg.ChatID {
	out := slices.Clone(sources)
	for i := 0; i < len(out); i++ { // an upgraded chat may itself be listed
		if to, ok := upgraded[out[i]]; ok && to != 0 && !slices.Contains(out, to) {
			out = append(out, to)
		}
	}
	return out
}
