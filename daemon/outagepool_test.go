package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/sim/tgsim"
)

// While the account's network is away its downloads make no progress and
// the requests that need the server wait for it, so every stage that
// works on Telegram waits too: none of them may hold a database
// connection meanwhile. Once back, every package is delivered once, those
// posted while away included.
func TestOutageHoldsNoDatabaseConnection(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPairOf(t, tgsim.Config{Seed: 41, SendLatency: 400 * time.Millisecond}, "a")
	cfg := floodConfig(pr.accounts()[:1], pr.dest)
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())
	const n = 4
	postTars(pr.world, pr.src, "outage", n)
	time.Sleep(100 * time.Millisecond) // the workers start their downloads
	pr.world.Disconnect("a", 0)
	// Posted while away: the session hears of them only from the
	// channel's difference once back.
	postTars(pr.world, pr.src, "away", 2)

	// Sample the pool for two seconds: a connection held across the wait
	// is in every sample.
	least, most := int32(poolConns), int32(0)
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		n := st.Pool().Stat().AcquiredConns()
		least, most = min(least, n), max(most, n)
	}
	if got := countDocuments(pr.world, pr.dest); got == n {
		t.Fatalf("all %d packages delivered before the outage: nothing waited on Telegram", n)
	}
	if least > 0 {
		t.Errorf("the pool never had fewer than %d connections taken (at most %d) while the account was offline; want none held across the wait", least, most)
	}
	pr.world.Reconnect("a")
	all := n + 2
	for deadline := time.Now().Add(30 * time.Second); countDocuments(pr.world, pr.dest) < all; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d packages delivered 30 s after the reconnect", countDocuments(pr.world, pr.dest), all)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if got := countDocuments(pr.world, pr.dest); got != all {
		t.Errorf("the destination holds %d documents, want %d: one delivered twice", got, all)
	}
}
