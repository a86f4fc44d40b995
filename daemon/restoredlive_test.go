package daemon_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/ingest"
	"stashd/internal/pgembed"
	"stashd/internal/pgtest"
	"stashd/tg"
)

// A dump restored in place under a running daemon keeps the server's
// identity and its connections: no new connection tells the rewind, and
// the periodic identity check may come only seconds later. The deliveries
// the dump still queues (a backlog when it was taken), sent since, must
// wait for that check and the destination's reconciliation rather than go
// a second time.
func TestDumpRestoredUnderARunningDaemonSendsNothingTwice(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.New(t)
	rw := newRewindWorld(t, 41)
	st := openStoreAt(t, url, poolConns)
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{rw.src}}}, Destinations: []tg.ChatID{rw.dest},
		Workers: 2, QueueCapacity: 64,
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		// The stage looks at its queue often, as a busy one does.
		Delivery:     ingest.DeliveryConfig{Interval: 50 * time.Millisecond, RetryDelay: 100 * time.Millisecond},
		DrainTimeout: 10 * time.Second,
	}, st, func(context.Context, string) (tg.Client, error) { return rw.world.Client("a"), nil })
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())
	rw.post(5)
	rw.waitAll(t, st)

	// Three packages are catalogued but not sent when the dump is taken:
	// the destination refuses them for now.
	rw.world.SetWriteAccess("a", rw.dest, false)
	rw.post(3)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		n, err := st.QueuedDeliveries(ctx, "")
		if err == nil && n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the refused deliveries were not queued: %d queued (%v)", n, err)
		}
	}
	backup := filepath.Join(t.TempDir(), "catalogue.dump")
	if err := pgembed.Dump(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	rw.world.SetWriteAccess("a", rw.dest, true)
	rw.waitAll(t, st)
	if docs, twice := rw.copies(); docs != 8 || len(twice) > 0 {
		t.Fatalf("before the restore the destination holds %d documents (twice: %v), want 8", docs, twice)
	}

	if err := pgembed.Restore(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	rw.post(1)
	rw.waitAll(t, st)
	if docs, twice := rw.copies(); docs != 9 || len(twice) > 0 {
		t.Fatalf("after a dump restored under the running daemon the destination holds %d documents (twice: %v), want 9", docs, twice)
	}
}

// The messages catalogued after the dump are forgotten by the restore, and
// the daemon must read them again however its sources move on meanwhile: a
// message posted right after the restore is handled at once, and the
// listener writes its source's state, while the identity check that names
// the restore and gives the listener the restored watermarks comes up to
// seconds later.
func TestDumpRestoredUnderARunningDaemonCataloguesTheForgottenAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.New(t)
	rw := newRewindWorld(t, 42)
	st := openStoreAt(t, url, poolConns)
	d := rw.run(t, st)
	defer d.Shutdown(context.Background())
	backup := rw.dumpAfter(t, st, url, 5)
	rw.post(3)
	rw.waitAll(t, st)
	if err := pgembed.Restore(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	forgotten := rw.keys[5:8]
	rw.post(1)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var missing []tg.MessageKey
		for _, k := range forgotten {
			if _, ok, err := st.MessageHandled(ctx, k); err != nil || !ok {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after a dump restored under the running daemon, the messages %v it forgot are still not catalogued again", missing)
		}
	}
	rw.waitAll(t, st)
	if docs, twice := rw.copies(); docs != 9 || len(twice) > 0 {
		t.Fatalf("after the restore the destination holds %d documents (twice: %v), want 9", docs, twice)
	}
}
