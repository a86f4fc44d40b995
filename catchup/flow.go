package catchup

import (
	"context"
	"errors"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"stashd/store"
	"stashd/tg"
)

// flow hands one source's pages to the ingest path, Parallel messages at
// a time across pages: the next page is read and its first messages start
// while the last ones of the page before still wait for their commit, so
// that a page's end is no pause. The watermark is checkpointed after
// every page whose messages were all handled, once every page before it
// was. With a Prelocker, the next Parallel messages of a page are locked
// in one round trip as soon as the ones before them have all started.
type flow struct {
	c    *Catchup
	ctx  context.Context // the scan's
	gctx context.Context // the group's: ends at the first failure
	chat tg.ChatID
	era  store.Era
	g    *errgroup.Group
	pl   Prelocker
	// pages are those handed over and not yet checkpointed, oldest first.
	pages []*flowPage
}

// flowPage is a page in flight. done closes once each of its messages was
// handled or failed; failed says one failed (set before done closes).
type flowPage struct {
	last     int64 // the server id of its newest message
	left     atomic.Int64
	failed   atomic.Bool
	done     chan struct{}
	releases []func()
}

func (c *Catchup) newFlow(ctx context.Context, chat tg.ChatID, era store.Era) *flow {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.Parallel)
	pl, _ := c.ing.(Prelocker)
	return &flow{c: c, ctx: ctx, gctx: gctx, chat: chat, era: era, g: g, pl: pl}
}

// add hands page's messages over, waiting for room among the Parallel in
// flight, and checkpoints the pages found handled meanwhile. Once a
// message or a checkpoint failed it waits for the messages in flight and
// returns the failure.
func (f *flow) add(page []tg.Message) error {
	fp := &flowPage{last: page[len(page)-1].ID.ServerID(), done: make(chan struct{})}
	fp.left.Store(int64(len(page)))
	f.pages = append(f.pages, fp)
	n := f.c.cfg.Parallel
	for i, m := range page {
		if err := f.checkpoint(); err != nil {
			return errors.Join(err, f.wait())
		}
		if f.gctx.Err() != nil {
			return f.wait()
		}
		if f.pl != nil && i%n == 0 {
			fp.releases = append(fp.releases, f.pl.Prelock(f.gctx, page[i:min(i+n, len(page))]))
		}
		f.g.Go(func() error {
			_, err := f.c.ing.Process(f.gctx, m)
			if err != nil {
				fp.failed.Store(true)
			}
			if fp.left.Add(-1) == 0 {
				close(fp.done)
			}
			return err
		})
	}
	if err := f.checkpoint(); err != nil {
		return errors.Join(err, f.wait())
	}
	return nil
}

// checkpoint advances the watermark past the oldest pages as long as each
// was handled whole, and lets go of their prelocks.
func (f *flow) checkpoint() error {
	for len(f.pages) > 0 {
		fp := f.pages[0]
		select {
		case <-fp.done:
		default:
			return nil
		}
		if fp.failed.Load() {
			return nil
		}
		fp.release()
		f.pages = f.pages[1:]
		if err := f.c.store.AdvanceWatermark(f.ctx, f.chat, fp.last); err != nil {
			return err
		}
		f.c.lst.CaughtUp(f.chat, f.era, fp.last)
	}
	return nil
}

// wait waits for every message handed over, checkpoints the pages handled
// whole up to the first that was not, lets go of every prelock and
// returns the first message's failure.
func (f *flow) wait() error {
	err := f.g.Wait()
	if cerr := f.checkpoint(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	for _, fp := range f.pages {
		fp.release()
	}
	f.pages = nil
	return err
}

func (fp *flowPage) release() {
	for _, release := range fp.releases {
		release()
	}
	fp.releases = nil
}
