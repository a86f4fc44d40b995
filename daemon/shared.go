package daemon

import (
	"context"
	"errors"
	"slices"
	"time"

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
// with no such chat makes no query.
type sharedWatch struct {
	d   *Daemon
	r   *accountRun
	run service.Runner
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
	for _, chat := range others {
		src, err := w.d.store.GetSource(ctx, chat)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				errs = append(errs, err)
			}
			continue
		}
		if src.Account != r.name {
			moved, err := w.d.takeOver(ctx, r, src)
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
	return errors.Join(errs...)
}
