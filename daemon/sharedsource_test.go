package daemon_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"stashd/catchup"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/store"
	"stashd/tg"
)

// sharedConfig is a daemon configuration in which both accounts of pr
// watch pr.src, in the order order names them.
func sharedConfig(pr pair, order ...string) daemon.Config {
	lists := map[string][]tg.ChatID{"a": {pr.src}, "b": {pr.src, pr.other}}
	cfg := daemon.Config{
		Destinations: []tg.ChatID{pr.dest}, Workers: 2, DrainTimeout: 5 * time.Second,
		Ingest:   ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		Catchup:  catchup.Config{Interval: 50 * time.Millisecond},
		Delivery: ingest.DeliveryConfig{Interval: 50 * time.Millisecond},
	}
	for _, name := range order {
		cfg.Accounts = append(cfg.Accounts, daemon.Account{Name: name, Sources: lists[name]})
	}
	return cfg
}

// A chat listed as a source of two accounts keeps the account recorded
// for it across starts, whichever account starts first: a restart asks
// nothing about it (no getChat for a known source), and neither account
// takes it from the other.
func TestSharedSourceKeepsItsAccountAcrossStarts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, poolConns)
	pr := newPair(t, 7, "a", "b")

	var owners []string
	for i := range 4 {
		order := []string{"a", "b"}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		before := map[string]int{"a": pr.world.Calls("a")[tg.MethodGetChat], "b": pr.world.Calls("b")[tg.MethodGetChat]}
		d := daemon.New(sharedConfig(pr, order...), st, pr.dial)
		if err := d.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		src, err := st.GetSource(ctx, pr.src)
		if err != nil {
			t.Fatal(err)
		}
		owners = append(owners, src.Account)
		if i > 0 {
			for _, acct := range order {
				if n := pr.world.Calls(acct)[tg.MethodGetChat] - before[acct]; n != 0 {
					t.Errorf("start %d: account %s made %d getChat calls while preparing; known sources cost none", i+1, acct, n)
				}
			}
		}
		if err := d.Run(); err != nil {
			t.Fatal(err)
		}
		d.Shutdown(context.Background())
	}
	for i, o := range owners[1:] {
		if o != owners[0] {
			t.Errorf("start %d recorded %s for the shared source, the first start %s (all: %v)", i+2, o, owners[0], owners)
		}
	}
}

// A chat listed as a source of two accounts, one of which was removed
// from it, is read by the other: what is posted while the daemon runs
// and while it is down is found, whichever account the configuration
// names first. The account removed may be recorded for it first; once
// its catch-up finds the access lost, the other takes the chat over.
func TestSharedSourceReadByTheAccountThatCan(t *testing.T) {
	t.Parallel()
	for _, order := range [][]string{{"a", "b"}, {"b", "a"}} {
		t.Run(order[0]+" first", func(t *testing.T) {
			ctx := t.Context()
			st := openStore(t, poolConns)
			pr := newPair(t, 8, "a", "b")
			pr.world.RemoveMember("b", pr.src, true)
			cfg := sharedConfig(pr, order...)
			start := func() *daemon.Daemon {
				d := daemon.New(cfg, st, pr.dial)
				daemon.SetSharedInterval(d, 50*time.Millisecond)
				prepareAndRun(t, d)
				return d
			}

			d := start()
			waitHandledFor(t, st, pr, postTars(pr.world, pr.src, "live", 1)[0].Key())
			d.Shutdown(context.Background())

			// Posted while nothing watches: only a catch-up finds it.
			missed := postTars(pr.world, pr.src, "down", 1)
			d = start()
			defer d.Shutdown(context.Background())
			waitHandledFor(t, st, pr, missed[0].Key())
			if src, err := st.GetSource(ctx, pr.src); err != nil || src.Account != "a" {
				t.Errorf("the shared source is recorded for %q (%v), want a, the account that reads it", src.Account, err)
			}
		})
	}
}

// waitHandledFor waits, bounded, until key is handled.
func waitHandledFor(t *testing.T, st *store.Store, pr pair, key tg.MessageKey) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, ok, err := st.MessageHandled(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			src, _ := st.GetSource(t.Context(), pr.src)
			t.Fatalf("message %s of the shared source never handled; the source is recorded for %s (access %s)", key, src.Account, src.Access)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
