package ingest

import (
	"context"
	"errors"
	"time"

	"stashd/internal/fifo"
	"stashd/internal/service"
	"stashd/tg"
)

// UnclaimedSends holds the sends a session reports that no Send was
// waiting for, until the SendRecorder takes them. Push never blocks the
// session's pump and never drops one: such a send may be the only trace
// of a second copy of a delivered part, which nothing else would find
// (reconciliation looks for intents, and its delivery is recorded). They
// are as many as an earlier session left pending, which its pacing
// bounds.
type UnclaimedSends = fifo.Queue[tg.Message]

// NewUnclaimedSends returns an empty queue.
func NewUnclaimedSends() *UnclaimedSends { return fifo.New[tg.Message]() }

// SendRecorder records, off the session's pump, the sends Telegram reports
// to this session that no Send was waiting for: after a restart TDLib
// finishes the previous session's pending messages by itself. Each is
// recorded by the token in its caption (Pipeline.RecordSend), so that the
// intent it fulfils is not sent again; one whose delivery another instance
// has recorded meanwhile with a message of its own is a second copy and is
// deleted from the destination. One it cannot settle is noted for the
// account's owner (SettleStrays); one it cannot even note (the database
// down) is tried again, with backoff, for as long as the recorder runs.
type SendRecorder struct {
	p   *Pipeline
	in  *UnclaimedSends
	run service.Runner
	// Backoff bounds: the first wait before a send is tried again, and the
	// longest (zero: a second and a minute).
	RetryBase, RetryMax time.Duration
}

// NewSendRecorder returns the recorder of p's account taking from in,
// which the session's handler fills.
func NewSendRecorder(p *Pipeline, in *UnclaimedSends) *SendRecorder {
	return &SendRecorder{p: p, in: in, RetryBase: time.Second, RetryMax: time.Minute}
}

// Start starts the loop.
func (r *SendRecorder) Start(ctx context.Context) error {
	return r.run.StartFunc(ctx, func(ctx context.Context) {
		var again []tg.Message // not even noted: tried again after wait
		wait := r.RetryBase
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
		// Stopping, the sends not settled yet are noted at once, in one
		// write bounded like any note: the stop does not wait for each.
		defer func() {
			if left := append(again, r.in.Take()...); len(left) > 0 {
				_ = r.p.noteSends(ctx, left) // logged
			}
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.in.Ready():
			case <-timer.C:
			}
			msgs := append(again, r.in.Take()...)
			again = nil
			for i, m := range msgs {
				if ctx.Err() != nil {
					again = append(again, msgs[i:]...)
					return
				}
				if err := r.record(ctx, m); err != nil {
					again = append(again, m)
				}
			}
			if len(again) == 0 {
				wait = r.RetryBase
				continue
			}
			timer.Reset(wait)
			wait = min(2*wait, r.RetryMax)
		}
	})
}

// record records m and returns an error when m is to be tried again.
func (r *SendRecorder) record(ctx context.Context, m tg.Message) error {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := r.p.RecordSend(wctx, m)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return err // stopping: noted with the sends left
	case errors.Is(err, errNotNoted):
		r.p.log.Warn("a send no waiter claimed could be neither settled nor noted; trying again", "destination", m.ChatID, "message", m.ID.ServerID(), "err", err)
		return err
	}
	r.p.log.Warn("a send no waiter claimed could not be settled; noted for the account's owner", "destination", m.ChatID, "message", m.ID.ServerID(), "err", err)
	return nil
}

// Stop stops the loop; it is idempotent.
func (r *SendRecorder) Stop() { r.run.Stop() }

// NoteLeft notes, for the account's owner, the sends offered since the
// loop stopped: the session reports sends until its client is closed.
// The account's stop calls it once the session is done.
func (r *SendRecorder) NoteLeft() {
	if left := r.in.Take(); len(left) > 0 {
		_ = r.p.noteSends(context.Background(), left) // logged
	}
}
