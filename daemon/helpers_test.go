package daemon_test

import (
	"testing"
	"time"

	"stashd/daemon"
	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// openStore opens a catalogue on a fresh test database, closed when the
// test ends.
func openStore(t testing.TB, conns int32) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t), MaxConns: conns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// prepareAndRun starts d (Prepare, then Run), failing the test on error.
func prepareAndRun(t testing.TB, d *daemon.Daemon) {
	t.Helper()
	if err := d.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.Run(); err != nil {
		t.Fatal(err)
	}
}

// waitHandled waits until key is handled for good (not a part waiting for
// its set). The daemon runs on its own goroutines and offers no signal per message; the poll is bounded and
// a passing run never waits out the deadline.
func waitHandled(t testing.TB, st *store.Store, key tg.MessageKey) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if out, ok, err := st.MessageHandled(t.Context(), key); err != nil {
			t.Fatal(err)
		} else if ok && out != store.OutcomePartPending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("message %s never handled", key)
		}
		<-tick.C
	}
}
