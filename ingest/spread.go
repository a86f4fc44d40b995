package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// Spread picks the account that sends one package's parts to dest, among
// the accounts of the daemon that may write there and can see source (the
// chat the parts were posted in); sends is how many send requests it will
// take (an album is one).
// It returns that account's pipeline (nil, or this pipeline, for this
// account) and done, called once the delivery has ended, whichever
// account made it.
type Spread func(source, dest tg.ChatID, sends int) (via *Pipeline, done func())

// errSpreadFetch marks a spread delivery whose account could not load the
// parts' messages: the picking account sends them itself.
var errSpreadFetch = errors.New("the chosen account cannot load the parts")

// spreadUnseenError is a spread delivery the chosen account could not
// send yet, its session not having seen a part, while the picking
// account's sends wait out a flood wait (Paused left): it is tried again
// after the retry delay, but never later than that wait's end. It does not
// unwrap to the 404 (which would make it permanent) nor to the flood wait.
type spreadUnseenError struct {
	Paused time.Duration
	msg    string
}

func (e *spreadUnseenError) Error() string { return e.msg }

// spreadDest delivers pkg to dest through the account Config.Spread picks
// (this one without it). All parts of the package go through that one
// account, in order, so a destination receives a set's parts in order. The
// chosen account loads the parts' messages itself: file ids and remote
// ids are per account, and inputFileRemote needs the account's own. When
// it cannot, this account sends them. A chosen account whose sends a 429
// paused before a part went hands the delivery to the next pick, which
// counts that pause.
func (p *Pipeline) spreadDest(ctx context.Context, pkg store.Package, parts []tg.Message, in route.Package, dest tg.ChatID) (int, bool, error) {
	if p.cfg.Spread == nil {
		return p.deliverDest(ctx, pkg, parts, in, dest)
	}
	sends := len(albums(len(parts), p.albumsAllowed()))
	via, done := p.cfg.Spread(in.Chat, dest, sends)
	n, handed, err := p.deliverVia(ctx, via, pkg, parts, in, dest)
	done()
	if _, flood := tg.FloodWait(err); flood && n == 0 && !handed && ctx.Err() == nil {
		// Telegram paused the chosen account's sends (there, or all of
		// them) before a part went: Spread now counts that pause, and
		// another account that may send at once takes the delivery
		// rather than let it wait.
		again, done := p.cfg.Spread(in.Chat, dest, sends)
		defer done()
		if p.orSelf(again) != p.orSelf(via) {
			return p.deliverVia(ctx, again, pkg, parts, in, dest)
		}
	}
	return n, handed, err
}

// orSelf is via, or this pipeline when via is nil.
func (p *Pipeline) orSelf(via *Pipeline) *Pipeline {
	if via == nil {
		return p
	}
	return via
}

// deliverVia delivers pkg to dest through via, the account Spread picked
// (this one when nil).
func (p *Pipeline) deliverVia(ctx context.Context, via *Pipeline, pkg store.Package, parts []tg.Message, in route.Package, dest tg.ChatID) (int, bool, error) {
	if via == nil || via == p {
		return p.deliverDest(ctx, pkg, parts, in, dest)
	}
	n, handed, err := via.deliverFor(ctx, pkg, parts, in, dest)
	if errors.Is(err, errSpreadFetch) {
		p.log.Info("the account chosen to send cannot load the parts; sending them here", "package", pkg.ID,
			"destination", dest, "chosen", via.cfg.Account, "err", err)
		n, handed, ferr := p.deliverDest(ctx, pkg, parts, in, dest)
		var unseen *notSeenError
		if _, flood := tg.FloodWait(ferr); flood && n == 0 && !handed && errors.As(err, &unseen) {
			// The chosen account has not seen a part yet (it does not
			// follow the source, and the difference its read started is
			// not in): it may see it sooner than this account may send.
			wait, _ := tg.FloodWait(ferr)
			return 0, false, &spreadUnseenError{Paused: wait,
				msg: fmt.Sprintf("deliver package %d to %d: the chosen account has not seen the parts yet, and %s is paused (%v): %v",
					pkg.ID, dest, p.cfg.Account, ferr, err)}
		}
		return n, handed, ferr
	}
	if err == nil && n > 0 {
		p.m.spread(via.cfg.Account, n)
	}
	return n, handed, err
}

// deliverFor delivers, through this pipeline's account, a package another
// account of the daemon ingested: it loads the parts' messages with its
// own session first (the caller holds the package's lock).
func (p *Pipeline) deliverFor(ctx context.Context, pkg store.Package, parts []tg.Message, in route.Package, dest tg.ChatID) (int, bool, error) {
	own := make([]tg.Message, len(parts))
	for i, m := range parts {
		// The message as this account sees it now may carry another
		// document (an edit): the picking account then sends the parts
		// it holds.
		got, err := p.readPart(ctx, pkg.ID, i, m.Key(), nil)
		if err != nil {
			if ctx.Err() != nil {
				return 0, false, ctx.Err()
			}
			return 0, false, fmt.Errorf("load part %d of package %d as %s: %w: %w", i, pkg.ID, p.cfg.Account, errSpreadFetch, err)
		}
		own[i] = got
	}
	return p.deliverDest(ctx, pkg, own, in, dest)
}
