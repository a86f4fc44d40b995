package daemon_test

import (
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"stashd/daemon"
	"stashd/store"
)

// The database metrics show the pool and the group commit: once packages
// are catalogued and delivered, group commits have run, holding at least
// one unit each (a package, an intent, a sent record, a release), none
// failed, and the pool reports its bound and its connections.
func TestDatabaseMetrics(t *testing.T) {
	t.Parallel()
	st := openStore(t, 8)
	m := newMirror(t, st, 29, daemon.Config{Workers: 2})
	prepareAndRun(t, m.d)
	defer m.d.Kill()

	const packages = 3
	waitHandled(t, st, m.postTars("db", packages).Key())
	// Catalogued is not delivered: the deliveries' units commit after.
	// Each package is at least its catalogue unit and its sent record
	// (with its queue row cleared and its lock released), and the first
	// delivery its intent (a delivery that follows another in the queue
	// has its intent written with the sent record before it); the wait
	// fails if they are never counted.
	const want = 2*packages + 1
	var mfs []*dto.MetricFamily
	waitFor(t, fmt.Sprintf("%d group-commit units for %d delivered packages", want, packages), func() bool {
		counts, err := st.DeliveryCounts(t.Context())
		if err != nil || counts[store.DeliverySent] < packages {
			return false
		}
		mfs = m.gather(t)
		units, _ := metricIn(mfs, "stashd_db_group_commit_units_total", "")
		return units >= want
	})
	value := func(name, state string) float64 {
		v, ok := metricIn(mfs, name, state)
		if !ok {
			t.Fatalf("metric %s{%s} not exported", name, state)
		}
		return v
	}
	commits, units := value("stashd_db_group_commits_total", ""), value("stashd_db_group_commit_units_total", "")
	if commits < 1 || units < commits {
		t.Errorf("group commits %v holding %v units; want at least one, at least one unit each", commits, units)
	}
	if f := value("stashd_db_group_commit_failed_units_total", ""); f != 0 {
		t.Errorf("%v failed units, want none", f)
	}
	if s := value("stashd_db_group_commit_seconds_total", ""); s <= 0 {
		t.Errorf("group commits took %v s in all, want some time", s)
	}
	if m := value("stashd_db_connections_max", ""); m != 8 {
		t.Errorf("stashd_db_connections_max = %v, want the store's 8", m)
	}
	if open := value("stashd_db_connections", "acquired") + value("stashd_db_connections", "idle"); open < 1 || open > 8 {
		t.Errorf("%v connections open, want between 1 and 8", open)
	}
	value("stashd_db_acquire_waits_total", "")
	value("stashd_db_acquire_wait_seconds_total", "")
}
