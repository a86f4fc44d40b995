package daemon_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/sim/tgsim"

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
// its set) and the delivery queue is empty: ingest queues deliveries, the
// delivery stages send them. The daemon runs on its own goroutines and
// offers no signal per message; the poll is bounded and a passing run
// never waits out the deadline.
func waitHandled(t testing.TB, st *store.Store, key tg.MessageKey) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if out, ok, err := st.MessageHandled(t.Context(), key); err != nil {
			t.Fatal(err)
		} else if ok && out != store.OutcomePartPending {
			if n, err := st.QueuedDeliveries(t.Context(), ""); err != nil {
				t.Fatal(err)
			} else if n == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("message %s never handled and delivered", key)
		}
		<-tick.C
	}
}

// postSets posts n three-part 7z sets (set0.7z.001…) in src and returns
// the keys of their last parts.
func postSets(world *tgsim.World, src tg.ChatID, n int) []tg.MessageKey {
	var last []tg.MessageKey
	for s := range n {
		whole := archivetest.SevenZip([]archivetest.File{{Name: "f", Data: []byte(strings.Repeat(fmt.Sprint(s), 5000))}})
		for i, part := range archivetest.Split(whole, 3) {
			m := world.Post(src, 0, tgsim.Post{FileName: fmt.Sprintf("set%d.7z.00%d", s, i+1), Data: part})
			if i == 2 {
				last = append(last, m.Key())
			}
		}
	}
	return last
}

// checkPartOrder fails the test unless dest holds want parts of the sets
// postSets posted, each set's parts in order.
func checkPartOrder(t *testing.T, world *tgsim.World, dest tg.ChatID, want int) {
	t.Helper()
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
	if n != want {
		t.Errorf("destination %d holds %d parts, want %d", dest, n, want)
	}
}
