package ingest

import (
	"context"

	"stashd/store"
	"stashd/tg"
)

// Backlog is the pipeline as catch-up uses it: a page keeps many messages
// in flight, most of them waiting for their lock or their catalogue's
// commit, so the packages it downloads, hashes and lists at once are
// bounded by the account's download slots (Config.Downloads). The live
// queue's workers, the set sweeper and the rescan are bounded by their
// own numbers, and never wait behind a backlog for a slot.
type Backlog struct{ p *Pipeline }

// Backlog returns the pipeline as catch-up uses it.
func (p *Pipeline) Backlog() Backlog { return Backlog{p} }

type backlogKey struct{}

// Process is Pipeline.Process for a message of a backlog.
func (b Backlog) Process(ctx context.Context, msg tg.Message) (store.Outcome, error) {
	return b.p.Process(context.WithValue(ctx, backlogKey{}, true), msg)
}

// Prelock is Pipeline.Prelock.
func (b Backlog) Prelock(ctx context.Context, msgs []tg.Message) (release func()) {
	return b.p.Prelock(ctx, msgs)
}

// inBacklog reports whether ctx is a backlog message's (Backlog.Process).
func inBacklog(ctx context.Context) bool {
	v, _ := ctx.Value(backlogKey{}).(bool)
	return v
}
