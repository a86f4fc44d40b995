package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/tg"
	"stashd/tg/tgsim"
)

// With a send budget, every send goes through it, and each destination
// receives a set's parts in order although workers deliver sets at once.
func TestSendBudgetPacesDeliveriesAndKeepsPartOrder(t *testing.T) {
	st := openStore(t, 16)
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
	var last []tg.MessageKey
	for s := range 3 {
		whole := archivetest.SevenZip([]archivetest.File{{Name: "f", Data: []byte(strings.Repeat(fmt.Sprint(s), 5000))}})
		for i, part := range archivetest.Split(whole, 3) {
			m := world.Post(src, 0, tgsim.Post{FileName: fmt.Sprintf("set%d.7z.00%d", s, i+1), Data: part})
			if i == 2 {
				last = append(last, m.Key())
			}
		}
	}
	for _, k := range last {
		waitHandled(t, st, k)
	}
	d.Shutdown(context.Background())

	for _, dest := range dests {
		seen := map[string]int{} // set -> last part seen
		n := 0
		for _, m := range world.Messages(dest) {
			if m.Document == nil {
				continue
			}
			n++
			name := m.Document.FileName
			set, part := name[:4], int(name[len(name)-1]-'0')
			if part != seen[set]+1 {
				t.Errorf("destination %d: %s arrived after part %d of its set", dest, name, seen[set])
			}
			seen[set] = part
		}
		if n != 9 {
			t.Errorf("destination %d holds %d parts, want 9", dest, n)
		}
	}
	if got := testutil.ToFloat64(metric(t, reg, "stashd_send_budget_sends_total")); got != 18 {
		t.Errorf("stashd_send_budget_sends_total = %v, want 18 (every send through the budget)", got)
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
