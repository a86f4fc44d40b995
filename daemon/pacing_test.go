package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// With a send budget, every send request (an album is one) goes through it,
// and each destination receives a set's parts in order although workers
// deliver sets at once.
func TestSendBudgetPacesDeliveriesAndKeepsPartOrder(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	world := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "news", "a")
	dests := []tg.ChatID{world.AddChat(tg.KindChannel, "d1", "a"), world.AddChat(tg.KindChannel, "d2", "a")}
	reg := prometheus.NewRegistry()
	cfg := daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, Destinations: dests,
		Workers: 4, DrainTimeout: 10 * time.Second, SendRate: 3000, SendInFlight: 2, Registry: reg,
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: 5 * time.Second},
	}
	d := daemon.New(cfg, st, func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
	prepareAndRun(t, d)
	for _, k := range postSets(world, src, 3) {
		waitHandled(t, st, k)
	}
	d.Shutdown(context.Background())

	for _, dest := range dests {
		checkPartOrder(t, world, dest, 9)
	}
	// Each set goes to each destination as one album: one send request.
	calls := world.Calls("a")
	requests := calls[tg.MethodSendMessage] + calls[tg.MethodSendMessageAlbum]
	if requests != 6 {
		t.Errorf("%d send requests (sendMessage %d, sendMessageAlbum %d), want 6: each set one album per destination",
			requests, calls[tg.MethodSendMessage], calls[tg.MethodSendMessageAlbum])
	}
	if got := testutil.ToFloat64(metric(t, reg, "stashd_send_budget_sends_total")); got != float64(requests) {
		t.Errorf("stashd_send_budget_sends_total = %v, want %d (every send request through the budget)", got, requests)
	}
	if got := testutil.ToFloat64(metric(t, reg, "stashd_sends_in_flight")); got != 0 {
		t.Errorf("stashd_sends_in_flight = %v after the drain, want 0", got)
	}
}

// metric returns the one series of name in reg as a collector.
func metric(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			v := mf.GetMetric()[0]
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name})
			switch {
			case v.Counter != nil:
				g.Set(v.Counter.GetValue())
			case v.Gauge != nil:
				g.Set(v.Gauge.GetValue())
			}
			return g
		}
	}
	t.Fatalf("no single series %s", name)
	return nil
}
