package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"stashd/ingest"
	"stashd/internal/service"
	"stashd/store"
	"stashd/tg"
)

// sharedInterval is how often an account looks again at the chats it
// lists that another account reads (Daemon.sharedEvery; shorter in
// tests).
const sharedInterval = time.Minute

// sharedWatch takes over, while the account runs, a chat it lists that
// another account reads once that account cannot read it any more (its
// catch-up recorded the access lost), stopped listing it, is logged out
// or has not run for a while (keepsSource): without it, such a chat would
// wait for this account's next start to be caught up again. An account
// with no such chat makes no query for it.
//
// It also takes over the deliveries queued for an account that does not
// run (accountAway: not logged in, or its lease untaken for a while) from
// a chat this account lists to a destination it sends to: they would
// otherwise wait for that account's return, for ever if it is gone. That
// costs two small reads a look (takeDeliveries).
type sharedWatch struct {
	d   *Daemon
	r   *accountRun
	run service.Runner
	// looked names, by account away, the end of the lease (and this
	// account's chats and destinations) its queue was last looked at for
	// (takeDeliveries).
	looked map[string]string
	// settled names, by account away, the absence (the end of its lease,
	// or when it logged out) and this account's destinations its notes of
	// unsettled sends were last settled for, none failing for a reason
	// that may pass.
	settled map[string]string
}

// Start starts the watch's goroutine.
func (w *sharedWatch) Start(ctx context.Context) error {
	return w.run.StartFunc(ctx, func(ctx context.Context) {
		service.Ticks(ctx, w.d.sharedEvery, nil, func(ctx context.Context) {
			if err := w.check(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, tg.ErrLeaseLost) {
				w.r.log.Warn("look at the sources other accounts read", "err", err)
			}
		})
	})
}

// Stop stops the watch and waits for it.
func (w *sharedWatch) Stop() { w.run.Stop() }

// check takes over every listed chat that its recorded account does not
// keep.
func (w *sharedWatch) check(ctx context.Context) error {
	r := w.r
	w.d.mu.Lock()
	var others []tg.ChatID
	for _, c := range r.listed {
		if !slices.Contains(r.account.Sources, c) {
			others = append(others, c)
		}
	}
	w.d.mu.Unlock()
	var errs []error
	owners := &ownerLooks{}
	for _, chat := range others {
		src, err := w.d.store.GetSource(ctx, chat)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				errs = append(errs, err)
			}
			continue
		}
		if src.Account != r.name {
			moved, err := w.d.takeOver(ctx, r, owners, src)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !moved {
				continue // kept, or another account took it first
			}
			if src, err = w.d.store.GetSource(ctx, chat); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		w.d.adopt(ctx, r, src)
	}
	if err := w.takeDeliveries(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// takeDeliveries moves to this account the deliveries queued for accounts
// away from the chats it lists to its destinations, settles those
// accounts' notes of sends to its destinations (ingest.SettleStraysOf),
// and wakes its delivery stage when it moved any.
//
// An account whose lease no instance has held for a while queues nothing,
// notes nothing and is handed nothing (only a running account queues and
// notes, and hand-overs go to accounts running in the same daemon), so its
// queue and notes are looked at once per absence (its lease's end) and per
// set of chats and destinations of this account, or again when a note's
// settling failed for a reason that may pass. An account logged out may
// still run, and be handed deliveries: its queue is looked at every time.
// It sends nothing, so notes nothing new: its notes are settled once per
// logout (the login state's Since) and set of destinations, or again after
// a failure that may pass, so that a note this account cannot settle (no
// right to delete another's message) costs no request and no log line a
// minute. Either look reads that account's queue and notes alone, after
// two small reads (the leases and the login states), not every account's.
func (w *sharedWatch) takeDeliveries(ctx context.Context) error {
	r := w.r
	w.d.mu.Lock()
	listed := slices.Clone(r.listed)
	w.d.mu.Unlock()
	if len(r.dests) == 0 {
		return nil
	}
	leases, err := w.d.store.Leases(ctx)
	if err != nil {
		return err
	}
	auths, err := w.d.store.AccountAuths(ctx)
	if err != nil {
		return err
	}
	moved := 0
	var errs []error
	for _, l := range leases {
		if l.Account == r.name {
			continue
		}
		away, why := awayBy(l, auths)
		if !away {
			continue
		}
		look, notes := "", ""
		if why != whyLoggedOut {
			look = fmt.Sprint(l.Until.UnixNano(), listed, r.dests)
			notes = look
		} else {
			i := slices.IndexFunc(auths, func(a store.AccountAuth) bool { return a.Account == l.Account })
			notes = fmt.Sprint("logged out ", auths[i].Since.UnixNano(), r.dests)
		}
		if look != "" && w.looked[l.Account] == look {
			continue // nothing queued or noted for it since this account's last look
		}
		if len(listed) > 0 {
			// Handed over: one this account finds it cannot read after all
			// is handed on, or waits, rather than given up as its own
			// source's.
			n, intents, err := w.d.store.TakeWaiting(ctx, l.Account, r.name, ingest.HandOverRoute, listed, r.dests, w.d.lateSendWindow())
			if err != nil {
				return err
			}
			if n > 0 {
				r.log.Info("deliveries queued for another account taken over", "from", l.Account, "because", why, "deliveries", n)
			}
			moved += n
			w.watchLate(ctx, intents)
		}
		// Sends it could not settle would otherwise wait for its return:
		// a second copy it noted would stay in the destination for ever.
		if w.settled[l.Account] != notes {
			if _, err := r.pipe.SettleStraysOf(ctx, l.Account, r.dests); err != nil {
				errs = append(errs, err) // looked at again next time
				continue
			}
			if w.settled == nil {
				w.settled = map[string]string{}
			}
			w.settled[l.Account] = notes
		}
		if w.looked == nil {
			w.looked = map[string]string{}
		}
		w.looked[l.Account] = look
	}
	if moved > 0 {
		r.pipe.WakeDelivery()
	}
	return errors.Join(errs...)
}

// watchLate watches, for what is left of their lateSendWindow, the
// destinations of intents, left by deliveries taken over, for messages
// carrying their tokens (ingest.LateSends): a send of the account away may
// still be on its way, and land after this account read the destination,
// found nothing and sent the part itself. Each destination is opened, so
// that the session is told of new posts there (TDLib sends a channel's
// updateNewMessage only to sessions that opened it) for as long as it
// runs.
func (w *sharedWatch) watchLate(ctx context.Context, intents []store.TakenIntent) {
	if len(intents) == 0 {
		return
	}
	r := w.r
	if left := r.late.Watch(intents...); left > 0 {
		r.log.Warn("too many sends taken over to watch for late landings; a late one may stay in its destination as a second copy", "unwatched", left)
	}
	opened := map[tg.ChatID]bool{}
	for _, in := range intents {
		if opened[in.Destination] {
			continue
		}
		opened[in.Destination] = true
		if _, err := r.views.Open(ctx, in.Destination); err != nil && ctx.Err() == nil {
			r.log.Warn("open a destination to watch for late sends of an account away", "destination", in.Destination, "err", err)
		}
	}
}

// resumeLate watches again, at the account's start, the intents an
// earlier run of it (or another instance holding its lease) took over
// and whose window has not passed (store.LateSendsWatched): that run's
// watch went with it, and this one takes nothing over again, the
// deliveries being its own already.
func (w *sharedWatch) resumeLate(ctx context.Context) error {
	intents, err := w.d.store.LateSendsWatched(ctx, w.r.name)
	if err != nil {
		return err
	}
	if len(intents) > 0 {
		w.r.log.Info("watching again for late sends of accounts away taken over before the start", "tokens", len(intents))
	}
	w.watchLate(ctx, intents)
	return nil
}

// lateSendWindow is how long an account watches the sends it took over
// (watchLate): the send timeout, stashd's longest wait for a send's
// outcome. Every send of the account away was made before its absence
// began, so before the take, and the window covers each for at least that
// long after it was made.
func (d *Daemon) lateSendWindow() time.Duration {
	return cmp.Or(d.cfg.SendTimeout, tg.DefaultSendTimeout)
}
