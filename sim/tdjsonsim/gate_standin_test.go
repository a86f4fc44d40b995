//go:build libtdjson

package tdjsonsim_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
	"stashd/tg/tdlib"
)

// The adapter's LoadChats pages through TDLib's chat lists, one request
// after another. A lease lost while it runs stops it at its next request:
// each request asks the account's gate (tg.WithGate), not only the first,
// so a paused owner that wakes up past its lease sends nothing more.
func TestLoadChatsAsksTheGateBeforeEachRequest(t *testing.T) {
	world := tgsim.NewWorld(tgsim.Config{Seed: 1})
	world.AddAccount("acct1", false)
	ctx, c := standinClient(t, world)

	world.ResetCalls()
	if err := c.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	whole := world.Calls("acct1")[tg.MethodLoadChats]
	if whole < 2 {
		t.Fatalf("LoadChats made %d loadChats requests; the test needs a method of several", whole)
	}

	world.ResetCalls()
	var asked atomic.Int32
	gate := func() error {
		if asked.Add(1) > 1 {
			return tg.ErrLeaseLost
		}
		return nil
	}
	err := c.LoadChats(tg.WithGate(ctx, gate))
	if !errors.Is(err, tg.ErrLeaseLost) {
		t.Fatalf("LoadChats with the lease lost after its first request: %v, want tg.ErrLeaseLost", err)
	}
	if got := world.Calls("acct1")[tg.MethodLoadChats]; got != 1 {
		t.Errorf("%d loadChats requests reached the server with the lease lost after the first; want 1 (of %d)", got, whole)
	}
}

// standinClient serves world through the stand-in library and returns a
// client of its account acct1, closed when t ends, with a context that
// ends within 30 s.
func standinClient(t *testing.T, world *tgsim.World) (context.Context, *tdlib.Client) {
	t.Helper()
	dir, _ := serveWorld(t, world)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	c, err := tdlib.New(ctx, standinConfig(dir, "acct1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return ctx, c
}
