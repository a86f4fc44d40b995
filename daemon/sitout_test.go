package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/daemon"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// TDLib sits out a chat's short flood waits itself: a send the
// destination's limit refuses stays pending and lands up to a minute
// later, and stashd hears of no 429. Each package reaches the destination
// once, whether the deliverer awaits the outcome as long as it takes (the
// default send timeout) or gives the send up long before TDLib sends it
// again (then the send that lands late is recorded by its token, not sent
// a second time).
func TestSendsTDLibSitsOutLandOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{{"outcome awaited", 0}, {"outcome given up", time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testSendsSatOut(t, tc.timeout)
		})
	}
}

func testSendsSatOut(t *testing.T, sendTimeout time.Duration) {
	const packages = 3
	st := openStore(t, poolConns)
	world := tgsim.NewWorld(tgsim.Config{Seed: 71, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "news", "a")
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	world.LimitChatSends(dest, 1.0/3, 1) // one send, then three seconds
	dial := func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil }
	cfg := floodConfig([]daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, dest)
	cfg.SendTimeout = sendTimeout
	reg := prometheus.NewRegistry()
	cfg.Registry = reg
	d := daemon.New(cfg, st, dial)
	prepareAndRun(t, d)
	defer d.Kill()

	postTars(world, src, "s", packages)
	waitDocuments(t, world, dest, packages)
	if world.FloodWaitsSatOut("a") == 0 {
		t.Fatal("TDLib sat out no wait of the destination's; the test proves nothing")
	}
	// Let whatever is still pending in TDLib land, and a second copy be
	// found and deleted.
	deadline := time.Now().Add(time.Minute)
	for {
		counts := map[string]int{}
		for _, m := range world.Messages(dest) {
			if m.Document != nil {
				counts[m.Document.FileName]++
			}
		}
		once := len(counts) == packages
		for _, n := range counts {
			once = once && n == 1
		}
		// A send the deliverer awaited is counted once its record is
		// committed: the count may trail the record a moment.
		awaited := sendTimeout > 0 || deliveries(t, reg, "sent") == packages
		if once && world.SendStats().ChatFlooded == 0 && sentDeliveries(t, st) == packages && awaited {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("destination holds %v (want each of %d packages once); %d deliveries recorded sent, %v seen landing by the deliverer; send stats %+v",
				counts, packages, sentDeliveries(t, st), deliveries(t, reg, "sent"), world.SendStats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b := world.FloodWaitBreaches("a"); len(b) != 0 {
		t.Errorf("breaches %v", b)
	}
	// The deliverer counts a send it saw land (all of them, awaited, as
	// the wait above requires); one it gave up on was recorded when TDLib
	// reported it landed.
	if sent := deliveries(t, reg, "sent"); sendTimeout > 0 && sent >= packages {
		t.Errorf("the deliverer saw %v sends land within %s; want some given up while TDLib sat out the chat's wait", sent, sendTimeout)
	}
	if p := daemon.DestPause(d, "a", dest); p != 0 {
		t.Errorf("the account's sends to the destination are paused for %s; stashd heard of no wait", p)
	}
}

// sentDeliveries counts the deliveries recorded sent.
func sentDeliveries(t *testing.T, st *store.Store) int {
	t.Helper()
	var n int
	if err := st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM deliveries WHERE state = 'sent'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// deliveries sums stashd_deliveries_total over the destinations for
// outcome.
func deliveries(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "stashd_deliveries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// While TDLib sits out a wait of one destination's (the send just takes
// seconds to land), the account's sends to its other destination go on:
// the second mirror has every package while the first has taken its
// second, and each ends with every package once.
func TestSendSatOutHoldsNoOtherDestination(t *testing.T) {
	t.Parallel()
	const packages = 4
	st := openStore(t, poolConns)
	world := tgsim.NewWorld(tgsim.Config{Seed: 72, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "news", "a")
	slow := world.AddChat(tg.KindChannel, "mirror", "a")
	fast := world.AddChat(tg.KindChannel, "second mirror", "a")
	world.LimitChatSends(slow, 1.0/3, 1) // one send, then three seconds
	dial := func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil }
	cfg := floodConfig([]daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, slow)
	cfg.Destinations = []tg.ChatID{slow, fast}
	d := daemon.New(cfg, st, dial)
	prepareAndRun(t, d)
	defer d.Kill()

	postTars(world, src, "s", packages)
	waitDocuments(t, world, fast, packages)
	if n := countDocuments(world, slow); n > 2 {
		t.Errorf("the first mirror held %d of %d packages when the second had them all: its sends sat out held the second's", n, packages)
	}
	waitDocuments(t, world, slow, packages)
	if world.FloodWaitsSatOut("a") == 0 {
		t.Fatal("TDLib sat out no wait of the first mirror's; the test proves nothing")
	}
	for _, dest := range []tg.ChatID{slow, fast} {
		if n := countDocuments(world, dest); n != packages {
			t.Errorf("destination %d holds %d documents, want %d", dest, n, packages)
		}
	}
	if b := world.FloodWaitBreaches("a"); len(b) != 0 {
		t.Errorf("breaches %v", b)
	}
}
