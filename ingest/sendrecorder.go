package ingest

import (
	"context"
	"time"

	"stashd/internal/service"
	"stashd/tg"
)

// SendRecorder records, off the session's pump, the sends Telegram reports
// to this session that no Send was waiting for: after a restart TDLib
// finishes the previous session's pending messages by itself. Each is
// recorded by the token in its caption (Pipeline.RecordSend), so that the
// intent it fulfils is not sent again; one whose delivery another instance
// has recorded meanwhile with a message of its own is a second copy and is
// deleted from the destination.
type SendRecorder struct {
	p   *Pipeline
	in  <-chan tg.Message
	run service.Runner
}

// NewSendRecorder returns the recorder of p's account reading in, which the
// session's handler fills without blocking (dropping when full is safe:
// reconciliation still finds the message by its token before any resend).
func NewSendRecorder(p *Pipeline, in <-chan tg.Message) *SendRecorder {
	return &SendRecorder{p: p, in: in}
}

// Start starts the loop.
func (r *SendRecorder) Start(ctx context.Context) error {
	return r.run.StartFunc(ctx, func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-r.in:
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := r.p.RecordSend(wctx, m)
				cancel()
				if err != nil && ctx.Err() == nil {
					r.p.log.Warn("record a send no waiter claimed; reconciliation will find it", "destination", m.ChatID, "message", m.ID.ServerID(), "err", err)
				}
			}
		}
	})
}

// Stop stops the loop; it is idempotent.
func (r *SendRecorder) Stop() { r.run.Stop() }
