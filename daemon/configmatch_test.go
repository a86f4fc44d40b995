package daemon_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/route"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// routedInstance starts instance name of account acc on st, routing src to
// dest, its log in logs.
func routedInstance(t *testing.T, name string, st *store.Store, world *tgsim.World, src, dest tg.ChatID, ev *events, logs *lockedBuffer) instance {
	t.Helper()
	return runInstance(t, name, st, world, daemon.Config{LeaseTTL: 3 * time.Second,
		Routes: []route.Spec{{Name: "main", Sources: []route.SpecSource{{Chat: route.Chat{ID: src}}},
			Destinations: []route.Chat{{ID: dest}}}}}, src, ev, logs)
}

// mismatchGauge is instance i's stashd_config_mismatch for acc (-1 when
// it is not exported).
func mismatchGauge(t *testing.T, i instance) float64 {
	t.Helper()
	mfs, err := i.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := metricIn(mfs, "stashd_config_mismatch", "acc")
	if !ok {
		return -1
	}
	return v
}

// Two instances share a database and run account acc in turn, but route
// its source to different destinations: after a failover its packages
// would go elsewhere. The standby reports the difference (a warning naming
// the account, the holder and what differs; stashd_config_mismatch 1;
// stashd status), and an instance configured the same way reports none.
// A standby with a differing configuration still takes the account over
// when its holder is gone, and the former holder, standing by now,
// reports the difference in turn.
func TestStandbyReportsAConfigurationDifferingFromTheHolders(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, world, src, d1, d2, ev := twoRoutesWorld(t, 5)

	var aLogs, bLogs, cLogs lockedBuffer
	a := routedInstance(t, "a", st, world, src, d1, ev, &aLogs)
	defer a.d.Shutdown(context.Background())
	ev.wait(t, "a", "acquired")
	same := routedInstance(t, "c", st, world, src, d1, ev, &cLogs)
	defer same.d.Shutdown(context.Background())
	b := routedInstance(t, "b", st, world, src, d2, ev, &bLogs)
	defer b.d.Shutdown(context.Background())

	if got := mismatchGauge(t, b); got != 1 {
		t.Errorf("standby b routes acc's source to another destination than holder a: stashd_config_mismatch{account=acc} = %v, want 1 (-1: not exported)", got)
	}
	warn := ""
	for _, line := range strings.Split(bLogs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "configuration") {
			warn = line
		}
	}
	if warn == "" {
		t.Errorf("standby b logged no warning of its configuration differing from holder a's; its log:\n%s", bLogs.String())
	} else {
		for _, want := range []string{"account=acc", "holder=a", "route main", "-> " + itoa(d1), "-> " + itoa(d2)} {
			if !strings.Contains(warn, want) {
				t.Errorf("b's warning %q does not say %q", warn, want)
			}
		}
	}
	if got := mismatchGauge(t, same); got != 0 {
		t.Errorf("standby c, configured as holder a is: stashd_config_mismatch = %v, want 0", got)
	}
	if strings.Contains(cLogs.String(), "differs") {
		t.Errorf("standby c, configured as holder a is, reported a difference:\n%s", cLogs.String())
	}
	rep, err := st.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found []store.ConfigMismatch
	for _, acc := range rep.Accounts {
		found = append(found, acc.ConfigMismatches...)
	}
	if len(found) != 1 || found[0].Instance != "b" || found[0].Holder != "a" || !strings.Contains(found[0].Differs, itoa(d2)) {
		t.Errorf("stashd status shows the configuration mismatches %+v, want one of standby b against holder a", found)
	}

	// a is gone (its database calls fail): b takes the account over all
	// the same, with its own configuration, which a reports once back.
	same.d.Shutdown(ctx)
	a.lease.paused.Store(true)
	ev.wait(t, "a", "stopped")
	ev.wait(t, "b", "acquired")
	if got := mismatchGauge(t, b); got != 0 {
		t.Errorf("b, holding acc now: stashd_config_mismatch = %v, want 0", got)
	}
	a.lease.paused.Store(false)
	timeout := time.After(60 * time.Second)
	for mismatchGauge(t, a) != 1 {
		select {
		case <-timeout:
			t.Fatalf("a, standing by behind b, never reported b's differing configuration; a's log:\n%s", aLogs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !strings.Contains(aLogs.String(), "holder=b") {
		t.Errorf("a's warning does not name holder b:\n%s", aLogs.String())
	}
}

func itoa(c tg.ChatID) string { return strconv.FormatInt(int64(c), 10) }

// twoRoutesWorld is a store and a world of seed where account acc reads
// source src and may send to d1 and d2, for instances that route it to
// one or the other.
func twoRoutesWorld(t *testing.T, seed int64) (st *store.Store, world *tgsim.World, src, d1, d2 tg.ChatID, ev *events) {
	t.Helper()
	st = openStore(t, 32)
	world = tgsim.NewWorld(tgsim.Config{Seed: seed, FilesDir: t.TempDir()})
	world.AddAccount("acc", false)
	src = world.AddChat(tg.KindChannel, "news", "acc")
	d1 = world.AddChat(tg.KindChannel, "mirror-one", "acc")
	d2 = world.AddChat(tg.KindChannel, "mirror-two", "acc")
	return st, world, src, d1, d2, newEvents()
}

// An instance's name is host:pid by default, so a standby restarted (with
// its configuration put right, as the runbook says) comes back under
// another name, and one taken out of service never comes back: what it
// recorded must not stay in stashd status for good. Here b, configured
// otherwise than holder a, reports it, then stops; "b again", configured
// as a is, stands by in its place.
func TestStatusForgetsTheMismatchOfAStandbyGone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, world, src, d1, d2, ev := twoRoutesWorld(t, 6)

	var aLogs, bLogs, cLogs lockedBuffer
	a := routedInstance(t, "a", st, world, src, d1, ev, &aLogs)
	defer a.d.Shutdown(context.Background())
	ev.wait(t, "a", "acquired")
	b := routedInstance(t, "b", st, world, src, d2, ev, &bLogs)
	if got := mismatchGauge(t, b); got != 1 {
		t.Fatalf("standby b, configured otherwise than holder a: stashd_config_mismatch = %v, want 1", got)
	}
	b.d.Shutdown(ctx)
	again := routedInstance(t, "b again", st, world, src, d1, ev, &cLogs)
	defer again.d.Shutdown(context.Background())
	if got := mismatchGauge(t, again); got != 0 {
		t.Fatalf("b restarted configured as holder a is: stashd_config_mismatch = %v, want 0", got)
	}
	var found []store.ConfigMismatch
	deadline := time.After(60 * time.Second)
	for {
		rep, err := st.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found = found[:0]
		for _, acc := range rep.Accounts {
			found = append(found, acc.ConfigMismatches...)
		}
		if len(found) == 0 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("a minute after standby b stopped and came back configured as holder a is, stashd status still shows %d configuration mismatch(es): %+v", len(found), found)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A holder running a stashd that records no configuration with the lease
// (one from before the check, during a rolling upgrade) leaves the one its
// predecessor wrote in place: a standby must not take it for the holder's
// and report a difference from an instance that no longer holds the
// account.
func TestStandbyComparesNothingWithAHolderThatRecordedNone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, world, src, d1, d2, ev := twoRoutesWorld(t, 7)

	var aLogs, bLogs lockedBuffer
	a := routedInstance(t, "a", st, world, src, d1, ev, &aLogs)
	ev.wait(t, "a", "acquired")
	a.d.Shutdown(ctx)
	// The older stashd's acquisition, which writes no configuration.
	if _, err := st.Pool().Exec(ctx, `UPDATE accounts SET lease_owner = 'older stashd', lease_last_owner = 'older stashd',
		lease_until = now() + interval '1 hour', lease_epoch = lease_epoch + 1, lease_taken_at = now() WHERE name = 'acc'`); err != nil {
		t.Fatal(err)
	}
	b := routedInstance(t, "b", st, world, src, d2, ev, &bLogs)
	defer b.d.Shutdown(context.Background())
	if got := mismatchGauge(t, b); got != 0 {
		t.Errorf("standby b behind a holder that recorded no configuration: stashd_config_mismatch = %v, want 0; b's log:\n%s", got, bLogs.String())
	}
}
