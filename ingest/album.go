package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"stashd/store"
	"stashd/tg"
)

// albumSender is a session that sends several documents as one album
// (tg.Session).
type albumSender interface {
	SendAlbumTo(ctx context.Context, chat tg.ChatID, thread int64, items []tg.AlbumItem) ([]tg.AlbumResult, error)
}

// albumsAllowed reports whether this pipeline's session sends albums.
func (p *Pipeline) albumsAllowed() bool {
	_, ok := p.tg.(albumSender)
	return ok
}

// span is the parts [first, end) of a package sent together: one album,
// or one part alone.
type span struct{ first, end int }

// parts are the indexes of the span's parts.
func (a span) parts() []int {
	idx := make([]int, 0, a.end-a.first)
	for i := a.first; i < a.end; i++ {
		idx = append(idx, i)
	}
	return idx
}

// albums cuts a package of n parts into the sends that deliver it: albums
// of at most tg.MaxAlbum parts, as even as can be (11 parts go as 6 and
// 5, not 10 and a lone part), or, without albums, one send per part.
func albums(n int, allowed bool) []span {
	size := 1
	if allowed && n > 1 {
		count := (n + tg.MaxAlbum - 1) / tg.MaxAlbum
		size = (n + count - 1) / count
	}
	var out []span
	for first := 0; first < n; first += size {
		out = append(out, span{first, min(first+size, n)})
	}
	return out
}

// deliverSpan sends the parts a of pkg (ms, their messages) to dest,
// into forum topic thread when not 0: alone, or as one album, under one
// turn of the send budget. With a budget the parts first wait for the
// turn; their intents are written once it comes, unless the delivery's
// lock was taken ahead with them (deliveryEnd): those a stop or a skipped
// delivery leaves unsent are dropped when the delivery lets its lock go,
// so only a crash leaves them to reconcile. Exactly once holds per
// part: each has its intent and token, written together before the send;
// parts recorded sent, or whose earlier intents one pass over the
// destination's history finds (an attempt that sent in full or in part,
// then stopped), are not sent again, and the rest go alone or as a smaller
// album. It returns how many parts it sent; a part that failed fails the
// call with its error after the others are recorded. Once the turn is
// taken, the span is finished under the account's SendScope, not ctx. last
// says the span ends the package: when all of it lands, its record ends
// the delivery (deliveryEnd).
func (p *Pipeline) deliverSpan(ctx context.Context, pkg store.Package, dest tg.ChatID, thread int64, a span, ms []tg.Message, last bool) (int, error) {
	ctx, done, err := p.sendTurn(ctx, pkg, dest, a.first)
	if err != nil {
		return 0, err
	}
	defer done()
	ctx, stop := p.sendScope(ctx)
	defer stop()
	ins, err := p.intents(ctx, pkg.ID, dest, a.parts())
	if err != nil {
		return 0, err
	}
	type pending struct {
		store.Intent
		m tg.Message
	}
	var todo []pending
	var unsure []store.Delivery // intents an earlier attempt wrote
	for k, in := range ins {
		if settled, err := p.foundCopy(ctx, in); err != nil {
			return 0, err
		} else if settled {
			continue
		}
		todo = append(todo, pending{in, ms[k]})
		if !in.Fresh {
			unsure = append(unsure, in.Delivery)
		}
	}
	if len(unsure) > 0 {
		found, ferr := p.findTokens(ctx, dest, unsure)
		// Parts found are recorded even when the search gave up on others.
		for _, d := range unsure {
			if m := found[d.Token]; m.found != 0 {
				if err := p.reconciled(ctx, d, m); err != nil {
					return 0, err
				}
			}
		}
		if ferr != nil {
			return 0, fmt.Errorf("reconcile delivery of package %d parts %d-%d to %d: %w", pkg.ID, a.first, a.end-1, dest, ferr)
		}
		todo = slices.DeleteFunc(todo, func(t pending) bool { return found[t.Token].found != 0 })
	}
	items := make([]tg.AlbumItem, len(todo))
	for k, t := range todo {
		items[k] = tg.AlbumItem{RemoteFileID: t.m.Document.File.RemoteID, Caption: p.captionFor(ctx, pkg, t.PartIndex, t.m, t.Token)}
	}
	var results []tg.AlbumResult
	switch len(todo) {
	case 0:
		return 0, nil
	case 1:
		msg, err := p.tg.SendTo(ctx, dest, thread, items[0].RemoteFileID, items[0].Caption)
		results = []tg.AlbumResult{{Message: msg, Err: err}}
	default:
		results, err = p.tg.(albumSender).SendAlbumTo(ctx, dest, thread, items)
		if err != nil {
			// No message was made.
			if refusal(err) {
				all := make([]store.Intent, len(todo))
				for k, t := range todo {
					all[k] = t.Intent
				}
				p.refused(ctx, all...)
			}
			return 0, fmt.Errorf("deliver package %d parts %d-%d to %d as an album: %w", pkg.ID, a.first, a.end-1, dest, err)
		}
	}
	var failed error
	var landed []store.Delivery
	var msgs []tg.MessageID
	var refusedParts []store.Intent
	for k, r := range results {
		t := todo[k]
		if r.Err != nil {
			if refusal(r.Err) {
				refusedParts = append(refusedParts, t.Intent)
			}
			failed = errors.Join(failed, fmt.Errorf("deliver package %d part %d to %d: %w", pkg.ID, t.PartIndex, dest, r.Err))
			continue
		}
		t.Account = p.cfg.Account // the account that sent it
		landed, msgs = append(landed, t.Delivery), append(msgs, r.Message.ID)
	}
	p.refused(ctx, refusedParts...)
	if len(landed) > 0 {
		if p.cfg.Wrote != nil {
			p.cfg.Wrote(dest)
		}
		if err := p.sent(ctx, landed, msgs, last && failed == nil); err != nil {
			failed = errors.Join(failed, err)
		}
	}
	return len(landed), failed
}

// intents returns the intents of parts idx of pkg to dest, in order: those
// written ahead with the delivery's lock (deliveryEnd, which is the
// delivery of pkg to dest), the others written now (EnsureIntents), in one
// round trip.
func (p *Pipeline) intents(ctx context.Context, pkg int64, dest tg.ChatID, idx []int) ([]store.Intent, error) {
	end, _ := ctx.Value(deliveryEndKey{}).(*deliveryEnd)
	ahead := end.takeAhead(idx)
	var rest []int
	for _, i := range idx {
		if _, ok := ahead[i]; !ok {
			rest = append(rest, i)
		}
	}
	var now []store.Intent
	if len(rest) > 0 {
		var err error
		if now, err = p.store.EnsureIntents(ctx, pkg, dest, rest, p.cfg.Account); err != nil {
			return nil, err
		}
	}
	out := make([]store.Intent, 0, len(idx))
	for _, i := range idx {
		if in, ok := ahead[i]; ok {
			out = append(out, in)
			continue
		}
		out, now = append(out, now[0]), now[1:]
	}
	return out, nil
}

// sendScope is ctx, with its values (the send turn, the lease's fence),
// ended by the account's SendScope instead of by ctx's plain cancellation:
// a loop stopped gracefully lets the send it is making finish and be
// recorded. A lost delivery lock (ctx's cause store.ErrLockLost) still
// ends it: another holder may be taking the delivery over.
func (p *Pipeline) sendScope(ctx context.Context) (context.Context, func()) {
	scope := p.cfg.SendScope
	if scope == nil {
		return ctx, func() {}
	}
	sctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopScope := context.AfterFunc(scope, func() { cancel(context.Cause(scope)) })
	stopLock := context.AfterFunc(ctx, func() {
		if cause := context.Cause(ctx); errors.Is(cause, store.ErrLockLost) {
			cancel(cause)
		}
	})
	return sctx, func() {
		stopScope()
		stopLock()
		cancel(context.Canceled)
	}
}
