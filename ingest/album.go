package ingest

import (
	"context"
	"errors"
	"fmt"

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

// deliverAlbum sends the parts a of pkg (ms, their messages) to dest, into
// forum topic thread when not 0, as one album, under one turn of the send
// budget; a span of one part is deliverPart. Exactly once holds per part:
// each has its intent and token, written together before the send; parts
// recorded sent, or whose earlier intents a single pass over the
// destination's history finds (an album an earlier attempt sent in full or
// in part), are not sent again, and the rest, one or more, go as a smaller
// album or alone. It returns how many parts it sent; a part that failed
// fails the call with its error after the others are recorded.
func (p *Pipeline) deliverAlbum(ctx context.Context, pkg store.Package, dest tg.ChatID, thread int64, a span, ms []tg.Message) (int, error) {
	if a.end-a.first == 1 {
		return p.deliverPart(ctx, pkg, dest, thread, a.first, ms[0])
	}
	ctx, done, err := p.sendTurn(ctx, pkg, dest, a.first)
	if err != nil {
		return 0, err
	}
	defer done()
	type pending struct {
		d     store.Delivery
		fresh bool
		m     tg.Message
	}
	var todo, unsure []pending
	idx := make([]int, len(ms))
	for k := range ms {
		idx[k] = a.first + k
	}
	ins, err := p.store.EnsureIntents(ctx, pkg.ID, dest, idx, p.cfg.Account)
	if err != nil {
		return 0, err
	}
	for k, in := range ins {
		if done, err := p.foundCopy(ctx, in); err != nil {
			return 0, err
		} else if done {
			continue
		}
		todo = append(todo, pending{in.Delivery, in.Fresh, ms[k]})
		if !in.Fresh {
			unsure = append(unsure, pending{in.Delivery, in.Fresh, ms[k]})
		}
	}
	if len(unsure) > 0 {
		// An earlier attempt wrote these intents and may have sent the
		// album, or part of it: one pass over the destination finds what
		// landed.
		ds := make([]store.Delivery, len(unsure))
		for k, u := range unsure {
			ds[k] = u.d
		}
		found, err := p.findTokens(ctx, dest, ds)
		if err != nil {
			return 0, fmt.Errorf("reconcile album of package %d parts %d-%d to %d: %w", pkg.ID, a.first, a.end-1, dest, err)
		}
		kept := todo[:0]
		for _, t := range todo {
			if m, ok := found[t.d.Token]; ok && m.found != 0 {
				if err := p.reconciled(ctx, t.d, m); err != nil {
					return 0, err
				}
				continue
			}
			kept = append(kept, t)
		}
		todo = kept
	}
	switch len(todo) {
	case 0:
		return 0, nil
	case 1:
		t := todo[0]
		msg, err := p.tg.SendTo(ctx, dest, thread, t.m.Document.File.RemoteID, p.captionFor(ctx, pkg, t.d.PartIndex, t.m, t.d.Token))
		if err != nil {
			p.refused(ctx, t.d, t.fresh, err)
			return 0, fmt.Errorf("deliver package %d part %d to %d: %w", pkg.ID, t.d.PartIndex, dest, err)
		}
		return 1, p.sent(ctx, t.d, msg.ID)
	}
	items := make([]tg.AlbumItem, len(todo))
	for k, t := range todo {
		items[k] = tg.AlbumItem{RemoteFileID: t.m.Document.File.RemoteID, Caption: p.captionFor(ctx, pkg, t.d.PartIndex, t.m, t.d.Token)}
	}
	results, err := p.tg.(albumSender).SendAlbumTo(ctx, dest, thread, items)
	if err != nil {
		for _, t := range todo {
			p.refused(ctx, t.d, t.fresh, err)
		}
		return 0, fmt.Errorf("deliver package %d parts %d-%d to %d as an album: %w", pkg.ID, a.first, a.end-1, dest, err)
	}
	sent := 0
	var failed error
	for k, r := range results {
		t := todo[k]
		if r.Err != nil {
			p.refused(ctx, t.d, t.fresh, r.Err)
			failed = errors.Join(failed, fmt.Errorf("deliver package %d part %d to %d: %w", pkg.ID, t.d.PartIndex, dest, r.Err))
			continue
		}
		sent++
		if err := p.sent(ctx, t.d, r.Message.ID); err != nil {
			failed = errors.Join(failed, err)
		}
	}
	return sent, failed
}
