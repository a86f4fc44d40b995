package ingest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"stashd/store"
)

// A send's scope outlives its caller's plain cancellation (a loop stopped
// gracefully) and keeps the caller's values, but ends with the account's
// scope and with the loss of the delivery lock the caller works under.
func TestSendScope(t *testing.T) {
	type key struct{}
	ended := func(ctx context.Context) bool {
		select {
		case <-ctx.Done():
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}

	account, stopAccount := context.WithCancel(context.Background())
	defer stopAccount()
	p := &Pipeline{cfg: Config{SendScope: account}}

	caller, stop := context.WithCancel(context.WithValue(context.Background(), key{}, "turn"))
	sctx, done := p.sendScope(caller)
	stop()
	if ended(sctx) {
		t.Fatal("the send ended with its caller's plain cancellation")
	}
	if sctx.Value(key{}) != "turn" {
		t.Error("the send's context lost its caller's values")
	}
	stopAccount()
	if !ended(sctx) {
		t.Fatal("the send outlived its account's scope")
	}
	done()

	p.cfg.SendScope = context.Background()
	locked, lose := context.WithCancelCause(context.Background())
	sctx, done = p.sendScope(locked)
	defer done()
	lose(fmt.Errorf("d:1:2: %w", store.ErrLockLost))
	if !ended(sctx) || !errors.Is(context.Cause(sctx), store.ErrLockLost) {
		t.Fatalf("the send outlived its lost lock (cause %v)", context.Cause(sctx))
	}
}
