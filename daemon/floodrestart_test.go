package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/daemon"
	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// restartFloodWait is a flood wait that outlives a restart of the daemon
// and ends within the test.
const restartFloodWait = 12 * time.Second

// waitPaused waits, bounded, until until reports a pause of account a of
// d that ends later than now, and returns its end.
func waitPaused(t *testing.T, d *daemon.Daemon, until func(*tg.Paced) time.Time) time.Time {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if p := daemon.AccountPaced(d, "a"); p != nil {
			if u := until(p); u.After(time.Now()) {
				return u
			}
		}
		if time.Now().After(deadline) {
			d.Kill()
			t.Fatal("the account was never paused by the injected flood wait")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noCallsBefore fails t if account a makes a request that count counts
// in calls made since before, seen before until; it returns once until
// has passed. A look counts only when it was over before until.
func noCallsBefore(t *testing.T, calls func() map[string]int, before map[string]int, until time.Time, count func(method string) bool) {
	t.Helper()
	for time.Now().Before(until) {
		now := calls()
		if !time.Now().Before(until) {
			return
		}
		for m, n := range now {
			if count(m) && n > before[m] {
				t.Fatalf("%d %s request(s) reached Telegram %v before the flood wait ended", n-before[m], m,
					time.Until(until).Round(time.Millisecond))
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A 429 that paused every request of an account holds the account after a
// restart too: the daemon is killed inside the wait, and the new one makes
// no request of the account until the wait has ended; then it catalogues
// what the first one could not.
func TestAccountFloodWaitOutlivesARestart(t *testing.T) {
	testAccountFloodWaitOutlives(t, 27, false)
}

// The instance that takes over an account whose owner died inside a flood
// wait honours the wait as well.
func TestAccountFloodWaitHoldsTheInstanceTakingOver(t *testing.T) {
	testAccountFloodWaitOutlives(t, 29, true)
}

func testAccountFloodWaitOutlives(t *testing.T, seed int64, takeover bool) {
	st := openStore(t, 16)
	pr := newPair(t, seed, "a")
	world, src := pr.world, pr.src
	cfg := floodConfig(pr.accounts()[:1], pr.dest)
	cfg.Instance, cfg.LeaseTTL = "one", 3*time.Second
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	world.InjectFloodWait("a", tg.MethodDownloadFile, restartFloodWait, 1)
	posted := postTars(world, src, "w", 1)
	until := waitPaused(t, d, (*tg.Paced).PausedUntil)
	d.Kill()

	before := world.Calls("a")
	cfg.Registry = prometheus.NewRegistry()
	if takeover {
		// It stands by until the dead owner's lease lapses, well
		// inside the wait.
		cfg.Instance = "two"
	}
	d = daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	noCallsBefore(t, func() map[string]int { return world.Calls("a") }, before, until, func(string) bool { return true })
	waitCatalogued(t, st, posted[0].Key())
}

// A 429 answering a send holds the account's sends after a restart too,
// whether or not the delivery it refused was put off before the stop: the
// daemon is killed as soon as the wait begins, and the new one sends
// nothing, a package posted after the restart included, until the wait
// has ended; then it delivers both.
func TestSendFloodWaitOutlivesARestart(t *testing.T) {
	// The killed daemon may hold the first package's delivery lock: a
	// short lifetime lets the new one take it soon after the wait.
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t), MaxConns: 16, LockTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	pr := newPair(t, 28, "a")
	world, src, dest := pr.world, pr.src, pr.dest
	cfg := floodConfig(pr.accounts()[:1], dest)
	// The deliveries put off by the wait are looked at again soon after
	// it has ended.
	cfg.Delivery.Interval = time.Second
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	world.InjectFloodWait("a", tg.MethodSendMessage, restartFloodWait, 1)
	posted := postTars(world, src, "x", 1)
	until := waitPaused(t, d, (*tg.Paced).SendPausedUntil)
	d.Kill()

	before := world.Calls("a")
	cfg.Registry = prometheus.NewRegistry()
	d = daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	posted = append(posted, postTars(world, src, "y", 1)...)
	noCallsBefore(t, func() map[string]int { return world.Calls("a") }, before, until, tg.SendMethod)
	waitDocuments(t, world, dest, len(posted))
	checkOnce(t, world, dest, posted)
}

// A send refused by a destination's own limit (429 in
// updateMessageSendFailed) holds the account's sends there after a
// restart too: a package posted after the restart is put off by the wait
// without a send that the destination would refuse again.
func TestChatFloodWaitOutlivesARestart(t *testing.T) {
	st := openStore(t, 16)
	pr := newPair(t, 30, "a")
	world, src, dest := pr.world, pr.src, pr.dest
	world.LimitChatSends(dest, 1.0/600, 1) // one send, then ten minutes
	cfg := floodConfig(pr.accounts()[:1], dest)
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	postTars(world, src, "c", 2)
	deadline := time.Now().Add(30 * time.Second)
	for daemon.DestPause(d, "a", dest) < time.Minute {
		if time.Now().After(deadline) {
			d.Kill()
			t.Fatalf("the destination never paused the account's sends (refused: %d)", world.ChatFlooded(dest))
		}
		time.Sleep(5 * time.Millisecond)
	}
	d.Kill()

	cfg.Registry = prometheus.NewRegistry()
	d = daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	third := postTars(world, src, "e", 1)[0]
	waitCatalogued(t, st, third.Key())
	// Both packages the destination has not taken are put off by its
	// wait: the one refused before the stop (if the stop did not come
	// first) and the one posted after it.
	ctx := context.Background()
	deadline = time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM waiting_deliveries WHERE opens_at > now() + interval '1 minute'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries put off by the destination's wait; want 2", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := world.ChatFlooded(dest); n != 1 {
		t.Errorf("the destination refused %d sends after the restart: the account sent inside its wait", n-1)
	}
}
