package daemon_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// Publishing that outruns the send budget is the normal state of a busy
// mirror. Here the budget allows one send a minute while three times as
// many packages as the account has workers arrive, so that every worker
// has a package waiting for a send turn, and the database pool is no
// larger than the workers: for five lease TTLs the account keeps its lease
// at the epoch it took, every package is catalogued (ingest never waits
// for the budget), and the deliveries wait in the queue.
func TestSendBudgetBacklogKeepsTheLease(t *testing.T) {
	t.Parallel()
	const workers = 4
	// A TTL long enough that a loaded test machine does not starve the
	// renewals (every third of it) past it: a whole unit run under a
	// profiler held one back more than 1.3 s.
	const ttl = 2 * time.Second
	st := openStore(t, workers)
	world := tgsim.NewWorld(tgsim.Config{Seed: 21, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "busy", "a")
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	var mu sync.Mutex
	var events []daemon.LeaseEvent
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, Destinations: []tg.ChatID{dest},
		Workers: workers, SendRate: 1, LeaseTTL: ttl, Instance: "only", DrainTimeout: time.Second,
		OnLease: func(e daemon.LeaseEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		},
	}, st, func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
	prepareAndRun(t, d)
	defer d.Kill()
	taken, err := st.Lease(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if taken.Owner != "only" {
		t.Fatalf("lease %+v, want it held by the instance", taken)
	}

	const packages = 3 * workers
	for i := range packages {
		name := fmt.Sprintf("p%02d.tar", i)
		world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	}
	// Five lease TTLs, looking at the lease three times per TTL (as often
	// as it is renewed): it must never change hands, not even back to
	// this instance at a later epoch.
	for end := time.Now().Add(5 * ttl); time.Now().Before(end); time.Sleep(ttl / 3) {
		l, err := st.Lease(t.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		if l.Epoch != taken.Epoch || l.Owner != "only" || !l.Held() {
			t.Fatalf("lease %+v after %v, want it held at epoch %d all along", l, time.Since(end.Add(-5*ttl)).Round(time.Millisecond), taken.Epoch)
		}
	}
	mu.Lock()
	for _, e := range events {
		if e.Kind == "stopped" || e.Epoch != taken.Epoch {
			t.Errorf("lease event %+v; want none but the first tenure's", e)
		}
	}
	mu.Unlock()
	pkgs, err := st.PackageHashes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != packages {
		t.Errorf("%d packages catalogued, want all %d while their deliveries wait for the budget", len(pkgs), packages)
	}
	sent := 0
	for _, m := range world.Messages(dest) {
		if m.Document != nil {
			sent++
		}
	}
	var queued int
	if err := st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM waiting_deliveries`).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if sent > 2 || sent+queued != packages {
		t.Errorf("%d sent and %d queued; want at most the budget's sends, the rest queued", sent, queued)
	}
}
