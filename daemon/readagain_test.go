package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/ingest"
	"stashd/tg"
)

// An account found unable to read a source (removed from it: its TDLib
// still knows the chat, its reads fail) hands its deliveries of that
// source's packages back and is passed over for them, but not for ever:
// once it is a member again, deliveries that only it may send go through
// it, without a restart.
func TestAccountBackInTheSourceTakesDeliveriesAgain(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 11, "a", "b")
	world, src, dest := pr.world, pr.src, pr.dest
	world.RemoveMember("b", src, true)
	world.SetWriteAccess("a", dest, false)
	cfg := daemon.Config{
		Accounts:     pr.accounts(),
		Destinations: []tg.ChatID{dest}, Workers: 2, DrainTimeout: 10 * time.Second,
		Ingest:   ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		Delivery: ingest.DeliveryConfig{Interval: 50 * time.Millisecond, RetryDelay: 100 * time.Millisecond},
	}
	d := daemon.New(cfg, st, pr.dial)
	daemon.SetNoReadRecheck(d, 200*time.Millisecond)
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())
	const n = 3
	posted := postTars(world, src, "h", n)
	// b was tried (its TDLib knows the source), could not read the parts
	// and handed the deliveries back: a holds them, refused write access.
	waitHeldForWrite(t, st, n)
	world.RemoveMember("b", src, false)
	waitDocuments(t, world, dest, n)
	checkOnce(t, world, dest, posted)
	for _, s := range world.Sends() {
		if s.Chat == dest && s.Account != "b" {
			t.Errorf("account %s's send to the destination was accepted; only b may write there", s.Account)
		}
	}
}
