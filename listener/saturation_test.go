package listener

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/store"
	"stashd/tg"
)

// receiverClient behaves like go-tdlib's receiver: one goroutine takes
// everything TDLib emits, in order, and hands updates to the consumer with
// a blocking send before it can deliver the next response. If the consumer
// stopped draining, every request would wait.
type receiverClient struct {
	tg.Client // only the methods below are used
	updates   chan tg.Update
	requests  chan chan tg.Chat
	stop      chan struct{}
}

func newReceiverClient(updates int) *receiverClient {
	c := &receiverClient{updates: make(chan tg.Update), requests: make(chan chan tg.Chat), stop: make(chan struct{})}
	go func() {
		defer close(c.updates)
		var pending []chan tg.Chat
		for s := int64(1); ; s++ {
			// Responses queue behind updates, as in TDLib's one stream.
			select {
			case r := <-c.requests:
				pending = append(pending, r)
			default:
			}
			if s <= int64(updates) {
				select {
				case c.updates <- doc(s):
				case <-c.stop:
					return
				}
			}
			for _, r := range pending {
				r <- tg.Chat{ID: chat}
			}
			pending = pending[:0]
			if s > int64(updates) {
				select {
				case r := <-c.requests:
					pending = append(pending, r)
				case <-c.stop:
					return
				}
			}
		}
	}()
	return c
}

func (c *receiverClient) Updates() <-chan tg.Update { return c.updates }

func (c *receiverClient) GetChat(ctx context.Context, _ tg.ChatID) (tg.Chat, error) {
	r := make(chan tg.Chat, 1)
	select {
	case c.requests <- r:
	case <-ctx.Done():
		return tg.Chat{}, ctx.Err()
	}
	select {
	case got := <-r:
		return got, nil
	case <-ctx.Done():
		return tg.Chat{}, ctx.Err()
	}
}

func (c *receiverClient) Close() error { close(c.stop); return nil }

// With the pipeline saturated — a queue of one, no worker draining it —
// the session pump still takes every update at once, so requests keep
// being answered: no request waits on update draining.
func TestRequestsAnsweredWhilePipelineSaturated(t *testing.T) {
	t.Parallel()
	l, _, m := setup(t, 1, 0)
	l.CaughtUp(chat, store.Era{}, 0)
	c := newReceiverClient(20_000)
	sess := tg.NewSession(c, l.HandleUpdate)
	defer func() { _ = c.Close(); <-sess.Done() }()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range 200 {
		if _, err := sess.GetChat(ctx, chat); err != nil {
			t.Fatalf("request %d not answered while the queue was full: %v", i, err)
		}
	}
	if n := len(l.Queue()); n != 1 {
		t.Errorf("queue holds %d, want it full (1)", n)
	}
	if got := testutil.ToFloat64(m.overflows.WithLabelValues("a")); got == 0 {
		t.Error("no overflow counted although the queue was full")
	}
	if !l.IsDirty(chat) {
		t.Error("overflowing updates did not mark the source dirty")
	}
}
