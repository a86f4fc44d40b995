package daemon_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// While deliveries wait for the send budget, stashd_delivery_backlog shows
// the deliveries due per configured destination and
// stashd_delivery_drain_seconds the time to send them at the budget
// (single-part packages at one send a minute: 60 s each), next to the
// alert's bound, stashd_delivery_drain_alert_seconds.
func TestDeliveryBacklogMetrics(t *testing.T) {
	st := openStore(t, 8)
	world := tgsim.NewWorld(tgsim.Config{Seed: 23, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "busy", "a")
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	reg := prometheus.NewRegistry()
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, Destinations: []tg.ChatID{dest},
		Workers: 2, SendRate: 1, DrainAlert: 5 * time.Minute, Instance: "only", DrainTimeout: time.Second, Registry: reg,
	}, st, func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
	daemon.SetBacklogInterval(d, 50*time.Millisecond)
	prepareAndRun(t, d)
	defer d.Kill()

	const packages = 6
	for i := range packages {
		name := fmt.Sprintf("p%02d.tar", i)
		world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	}
	label := strconv.FormatInt(int64(dest), 10)
	// gauges gathers the registry once; gauge reads name{destination=dest}
	// (or name without labels) from it, -1 while it does not exist yet.
	// The daemon sets the backlog and its drain one after the other, so
	// they are compared from one gathering.
	gauges := func() []*dto.MetricFamily {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		return mfs
	}
	gaugeIn := func(mfs []*dto.MetricFamily, name string) float64 {
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() == label {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	// At one send a minute at most one package leaves the queue in the
	// test's time: the rest (at least packages-2) wait, each one send.
	deadline := time.Now().Add(time.Minute)
	var backlog, drain float64
	for {
		mfs := gauges()
		backlog, drain = gaugeIn(mfs, "stashd_delivery_backlog"), gaugeIn(mfs, "stashd_delivery_drain_seconds")
		if backlog >= packages-2 && drain == 60*backlog {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stashd_delivery_backlog = %v, drain %v s after a minute; want at least %d deliveries, 60 s each at one send a minute",
				backlog, drain, packages-2)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if backlog > packages {
		t.Errorf("backlog %v; want at most %d deliveries", backlog, packages)
	}
	if got := gaugeIn(gauges(), "stashd_delivery_drain_alert_seconds"); got != 300 {
		t.Errorf("stashd_delivery_drain_alert_seconds = %v, want 300 (delivery_drain_alert 5m)", got)
	}
}
