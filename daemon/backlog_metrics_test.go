package daemon_test

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"stashd/daemon"
	"stashd/internal/pgtest"
	"stashd/internal/pgtrips"
	"stashd/store"
	"stashd/tg"
)

// While deliveries wait for the send budget, stashd_delivery_backlog shows
// the deliveries due per configured destination and
// stashd_delivery_drain_seconds the time to send them at the budget
// (single-part packages at one send a minute: 60 s each), next to the
// alert's bound, stashd_delivery_drain_alert_seconds.
func TestDeliveryBacklogMetrics(t *testing.T) {
	t.Parallel()
	m := newMirror(t, openStore(t, 8), 23, daemon.Config{Workers: 2, SendRate: 1, DrainAlert: 5 * time.Minute})
	daemon.SetBacklogInterval(m.d, 50*time.Millisecond)
	prepareAndRun(t, m.d)
	defer m.d.Kill()

	const packages = 6
	m.postTars("p", packages)
	label := strconv.FormatInt(int64(m.dest), 10)
	// gaugeIn reads name{destination=dest} (or name without labels) from
	// one gathering, -1 while it does not exist yet. The daemon sets the
	// backlog and its drain one after the other, so they are compared
	// from one gathering.
	gaugeIn := func(mfs []*dto.MetricFamily, name string) float64 {
		if v, ok := metricIn(mfs, name, label); ok {
			return v
		}
		return -1
	}
	// At one send a minute at most one package leaves the queue in the
	// test's time: the rest (at least packages-2) wait, each one send.
	deadline := time.Now().Add(time.Minute)
	var backlog, drain float64
	for {
		mfs := m.gather(t)
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
	if got := gaugeIn(m.gather(t), "stashd_delivery_drain_alert_seconds"); got != 300 {
		t.Errorf("stashd_delivery_drain_alert_seconds = %v, want 300 (delivery_drain_alert 5m)", got)
	}
}

// The backlog gauges' figures cover every destination, so an instance
// reads them once an interval, not once per account: two accounts read
// them about as often as one would.
func TestBacklogReadOncePerInstance(t *testing.T) {
	t.Parallel()
	var reads atomic.Int64
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t), MaxConns: 16, Tracer: pgtrips.Tracer{Sent: func(what string) {
		if strings.Contains(what, "WITH due AS") {
			reads.Add(1)
		}
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	pr := newPair(t, 29, "a", "b")
	const every = 50 * time.Millisecond
	d := daemon.New(daemon.Config{Accounts: pr.accounts(), Destinations: []tg.ChatID{pr.dest}, Workers: 1,
		DrainTimeout: 5 * time.Second, Registry: prometheus.NewRegistry()}, st, pr.dial)
	daemon.SetBacklogInterval(d, every)
	prepareAndRun(t, d)
	defer d.Kill()
	start, from := time.Now(), reads.Load()
	time.Sleep(40 * every)
	n, intervals := reads.Load()-from, int64(time.Since(start)/every)
	if n > intervals*13/10+2 {
		t.Errorf("two accounts read the backlog %d times in %d intervals, want about once an interval", n, intervals)
	}
	if n == 0 {
		t.Error("the backlog was never read")
	}
}
