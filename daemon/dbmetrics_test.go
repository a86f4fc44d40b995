package daemon_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// The database metrics show the pool and the group commit: once packages
// are catalogued and delivered, group commits have run, holding at least
// one unit each (a package, an intent, a sent record, a release), none
// failed, and the pool reports its bound and its connections.
func TestDatabaseMetrics(t *testing.T) {
	st := openStore(t, 8)
	world := tgsim.NewWorld(tgsim.Config{Seed: 29, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "busy", "a")
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	reg := prometheus.NewRegistry()
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, Destinations: []tg.ChatID{dest},
		Workers: 2, Instance: "only", DrainTimeout: time.Second, Registry: reg,
	}, st, func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
	prepareAndRun(t, d)
	defer d.Kill()

	const packages = 3
	var last tg.Message
	for i := range packages {
		name := fmt.Sprintf("db%02d.tar", i)
		last = world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	}
	waitHandled(t, st, last.Key())

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	value := func(name, state string) float64 {
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if state != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != state) {
					continue
				}
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("metric %s{%s} not exported", name, state)
		return 0
	}
	commits, units := value("stashd_db_group_commits_total", ""), value("stashd_db_group_commit_units_total", "")
	// Each package is at least its catalogue unit, its intent, its sent
	// record and its release.
	if commits < 1 || units < commits || units < 4*packages {
		t.Errorf("group commits %v holding %v units; want at least one, at least one unit each, and %d units", commits, units, 4*packages)
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
