package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/internal/pgembed"
	"stashd/internal/pgtest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// rewindWorld is one account, one source and one destination.
type rewindWorld struct {
	world     *tgsim.World
	src, dest tg.ChatID
	n         int
	keys      []tg.MessageKey
}

func newRewindWorld(t *testing.T, seed int64) *rewindWorld {
	return newRewindWorldOf(t, tgsim.Config{Seed: seed})
}

// newRewindWorldOf is newRewindWorld on a world configured by cfg.
func newRewindWorldOf(t *testing.T, cfg tgsim.Config) *rewindWorld {
	cfg.FilesDir = t.TempDir()
	w := tgsim.NewWorld(cfg)
	w.AddAccount("a", false)
	return &rewindWorld{world: w, src: w.AddChat(tg.KindChannel, "source", "a"), dest: w.AddChat(tg.KindChannel, "mirror", "a")}
}

// post publishes n distinct zips and returns the last one's key.
func (rw *rewindWorld) post(n int) tg.MessageKey {
	var last tg.MessageKey
	for range n {
		rw.n++
		data := archivetest.Zip([]archivetest.File{{Name: "f.txt", Data: fmt.Appendf(nil, "archive %d", rw.n)}})
		last = rw.world.Post(rw.src, 0, tgsim.Post{FileName: fmt.Sprintf("a%03d.zip", rw.n), Data: data}).Key()
		rw.keys = append(rw.keys, last)
	}
	return last
}

// waitAll waits until every message posted so far is handled and the
// delivery queue is empty.
func (rw *rewindWorld) waitAll(t *testing.T, st *store.Store) {
	t.Helper()
	for _, k := range rw.keys {
		waitHandled(t, st, k)
	}
}

// copies counts the documents in the destination by file.
func (rw *rewindWorld) copies() (docs int, twice []string) {
	seen := map[string]int{}
	for _, m := range rw.world.Messages(rw.dest) {
		if m.Document != nil {
			docs++
			seen[m.Document.FileName]++
			if seen[m.Document.FileName] == 2 {
				twice = append(twice, m.Document.FileName)
			}
		}
	}
	return docs, twice
}

func (rw *rewindWorld) daemon(st *store.Store) *daemon.Daemon {
	return daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{rw.src}}}, Destinations: []tg.ChatID{rw.dest},
		Workers: 2, QueueCapacity: 64,
		Ingest:       ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		DrainTimeout: 10 * time.Second,
	}, st, func(context.Context, string) (tg.Client, error) { return rw.world.Client("a"), nil })
}

// run starts rw.daemon on st.
func (rw *rewindWorld) run(t *testing.T, st *store.Store) *daemon.Daemon {
	t.Helper()
	d := rw.daemon(st)
	prepareAndRun(t, d)
	return d
}

// dumpAfter posts n archives, waits until they are handled and dumps the
// catalogue at url, returning the dump's path.
func (rw *rewindWorld) dumpAfter(t *testing.T, st *store.Store, url string, n int) string {
	t.Helper()
	rw.post(n)
	rw.waitAll(t, st)
	backup := filepath.Join(t.TempDir(), "catalogue.dump")
	if err := pgembed.Dump(t.Context(), "", url, backup); err != nil {
		t.Fatal(err)
	}
	return backup
}

// wantOneMoreAfterRestore posts one archive to the 11 delivered before a
// restore and wants the destination to hold 12 documents, none twice.
func (rw *rewindWorld) wantOneMoreAfterRestore(t *testing.T, st *store.Store) {
	t.Helper()
	rw.post(1)
	rw.waitAll(t, st)
	if docs, twice := rw.copies(); docs != 12 || len(twice) > 0 {
		t.Fatalf("after the restore the destination holds %d documents (twice: %v), want 12", docs, twice)
	}
}

// restore stops d and closes st once the destination holds 11 documents,
// none twice, restores the catalogue at url from backup and opens a store
// on it, closed when the test ends.
func (rw *rewindWorld) restore(t *testing.T, d *daemon.Daemon, st *store.Store, url, backup string) *store.Store {
	t.Helper()
	ctx := t.Context()
	d.Shutdown(ctx)
	st.Close()
	if docs, twice := rw.copies(); docs != 11 || len(twice) > 0 {
		t.Fatalf("before the restore the destination holds %d documents (twice: %v), want 11", docs, twice)
	}
	if err := pgembed.Restore(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	return openStoreAt(t, url, poolConns)
}

// A catalogue restored from a backup has forgotten deliveries that
// happened after the backup. The daemon finds the destination's newest
// copies unknown, reconciles the destination before sending, and nothing
// reaches it twice although catch-up hands every forgotten message to
// ingest again.
func TestRestoredCatalogueSendsNothingTwice(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rw, st := restoredAfterABackup(t, 31, nil)
	d := rw.run(t, st)
	defer d.Shutdown(context.Background())
	rw.wantOneMoreAfterRestore(t, st)
	if n, err := st.RecoveredDeliveries(ctx); err != nil || n < 6 {
		t.Fatalf("recovered deliveries %d (%v), want the 6 the backup lacked", n, err)
	}
}

// A restart over a current catalogue reads no destination's history: the
// destination's newest message (from TDLib's chat cache) is one the
// catalogue records, so nothing can have been forgotten.
func TestRestartOverCurrentCatalogueReadsNoHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rw := newRewindWorld(t, 32)
	st := openStore(t, 8)
	d := rw.run(t, st)
	rw.post(3)
	rw.waitAll(t, st)
	d.Shutdown(ctx)

	before := rw.world.Calls("a")[tg.MethodGetChatHistory]
	d = rw.run(t, st)
	defer d.Shutdown(context.Background())
	rw.post(1)
	rw.waitAll(t, st)
	if n := rw.world.Calls("a")[tg.MethodGetChatHistory] - before; n != 0 {
		t.Errorf("restart over a current catalogue read %d pages of history, want none", n)
	}
	if docs, twice := rw.copies(); docs != 4 || len(twice) > 0 {
		t.Errorf("destination holds %d documents (twice: %v), want 4", docs, twice)
	}
}

// A real primary and standby: the primary dies and the standby is
// promoted under a running daemon whose connection string names both. Its
// writes resume on the new primary (everything published afterwards is
// catalogued and delivered), and nothing is delivered twice.
func TestFailoverToAPromotedStandby(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	base, err := os.MkdirTemp("", "stashd-failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(cfg pgembed.Config) *pgembed.Cluster {
		c, err := pgembed.Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop() })
		return c
	}
	// Synchronous: every commit the daemon saw is on the standby, so the
	// test is about writes resuming, not about a rewind (chaos --pg-standby
	// async covers those).
	primary := start(pgembed.Config{Dir: filepath.Join(base, "a"), Synchronous: true})
	standby := start(pgembed.Config{Dir: filepath.Join(base, "b"), Synchronous: true, StandbyOf: primary.URL("")})
	if err := primary.WaitStreaming(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	url := pgembed.URLs("", primary, standby)
	rw := newRewindWorld(t, 37)
	st := openStoreAt(t, url, poolConns)
	d := rw.run(t, st)
	defer d.Shutdown(context.Background())
	rw.post(4)
	rw.waitAll(t, st)

	if err := syscall.Kill(primary.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-primary.Done()
	rw.post(3) // published while no server takes writes
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	// A synchronous primary waits for a standby at each commit: a new one
	// is copied from the promoted server, as Patroni would.
	start(pgembed.Config{Dir: filepath.Join(base, "c"), Synchronous: true, StandbyOf: standby.URL("")})
	rw.post(2)
	rw.waitAll(t, st)
	if docs, twice := rw.copies(); docs != 9 || len(twice) > 0 {
		t.Fatalf("after the failover the destination holds %d documents (twice: %v), want 9", docs, twice)
	}
	var onStandby bool
	if err := st.Pool().QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&onStandby); err != nil || onStandby {
		t.Fatalf("the daemon's connections: in recovery %v (%v), want the new primary", onStandby, err)
	}
}

// An instance restarted on its TDLib directory shows a destination as it
// last followed it: TDLib answers getChat and the newest page of history
// from the session's database, and learns what another instance sent
// meanwhile only from the channel's difference, which openChat starts and
// which arrives later. A catalogue restored from a backup taken before
// that other instance's deliveries must still be found behind, or the
// messages catch-up hands to ingest again are sent twice.
func TestRestoredCatalogueSeesAnotherInstancesCopiesLagging(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.New(t)
	rw := newRewindWorldOf(t, tgsim.Config{Seed: 33, DifferenceDelay: 300 * time.Millisecond})
	in := func(st *store.Store, dir string) *daemon.Daemon {
		return daemon.New(daemon.Config{
			Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{rw.src}}}, Destinations: []tg.ChatID{rw.dest},
			Workers: 2, QueueCapacity: 64,
			Ingest:       ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
			DrainTimeout: 10 * time.Second,
		}, st, func(context.Context, string) (tg.Client, error) { return rw.world.ClientIn("a", dir), nil })
	}

	st := openStoreAt(t, url, poolConns)
	d := in(st, "instance-1")
	prepareAndRun(t, d)
	backup := rw.dumpAfter(t, st, url, 5)
	d.Shutdown(ctx)
	// Another instance delivers while the first is stopped.
	d = in(st, "instance-2")
	prepareAndRun(t, d)
	rw.post(6)
	rw.waitAll(t, st)
	st = rw.restore(t, d, st, url, backup)
	d = in(st, "instance-1")
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())
	rw.wantOneMoreAfterRestore(t, st)
}

// A dump restored into the same database keeps the server's identity, so
// only the destinations could tell the rewind, and a destination's newest
// page may hold none of stashd's copies: people talk in it. The restore
// must still be noticed, or the messages catch-up hands to ingest again are
// sent twice.
func TestRestoredDumpNoticedBehindAChattyDestination(t *testing.T) {
	t.Parallel()
	rw, st := restoredBehindAChattyDestination(t, 38)
	d := rw.run(t, st)
	defer d.Shutdown(context.Background())
	rw.wantOneMoreAfterRestore(t, st)
}

// The start-up identity check is what names a dump restored in place
// behind a destination whose newest page shows none of stashd's copies.
// A check that fails (the database refusing for a moment) must hold the
// deliveries until one goes through, rather than let them go unchecked
// until the periodic check.
func TestStartUpIdentityCheckThatFailsHoldsDeliveries(t *testing.T) {
	t.Parallel()
	rw, st := restoredBehindAChattyDestination(t, 39)
	// The record of the server's identity fails until the trigger goes.
	ctx := t.Context()
	if _, err := st.Pool().Exec(ctx, `CREATE FUNCTION refuse_identity() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused for the test'; END $$;
		CREATE TRIGGER refuse_identity BEFORE INSERT OR UPDATE ON database_identity
			FOR EACH ROW EXECUTE FUNCTION refuse_identity()`); err != nil {
		t.Fatal(err)
	}
	d := rw.run(t, st)
	defer d.Shutdown(context.Background())
	// Catch-up hands the 6 forgotten messages to ingest again, which
	// queues their deliveries; the delivery stage then meets them.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var queued int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM waiting_deliveries`).Scan(&queued); err != nil {
			t.Fatal(err)
		}
		if docs, _ := rw.copies(); queued >= 6 || docs > 11 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the forgotten messages were not queued again: %d deliveries queued", queued)
		}
	}
	time.Sleep(time.Second)
	if docs, twice := rw.copies(); docs != 11 || len(twice) > 0 {
		t.Fatalf("while the identity check fails the destination came to hold %d documents (twice: %v), want the 11 it held", docs, twice)
	}
	if _, err := st.Pool().Exec(ctx, `DROP TRIGGER refuse_identity ON database_identity`); err != nil {
		t.Fatal(err)
	}
	rw.wantOneMoreAfterRestore(t, st)
}

// restoredBehindAChattyDestination is restoredAfterABackup with more than
// a search page of readers' messages posted in the destination since the
// dump: a rewind that neither the server's identity nor the destination's
// newest page tells.
func restoredBehindAChattyDestination(t *testing.T, seed int64) (*rewindWorld, *store.Store) {
	t.Helper()
	return restoredAfterABackup(t, seed, func(rw *rewindWorld) {
		for i := range tg.MaxSearchLimit + 1 {
			rw.world.Post(rw.dest, 0, tgsim.Post{Text: fmt.Sprintf("a reader's remark %d", i)})
		}
	})
}

// restoredAfterABackup runs a daemon of a rewind world of seed that
// delivers 11 packages, runs meanwhile (when not nil), then restores the
// catalogue in place from a dump taken after the first 5. It returns the
// world and the restored catalogue, no daemon running.
func restoredAfterABackup(t *testing.T, seed int64, meanwhile func(rw *rewindWorld)) (*rewindWorld, *store.Store) {
	t.Helper()
	url := pgtest.New(t)
	rw := newRewindWorld(t, seed)
	st := openStoreAt(t, url, poolConns)
	d := rw.run(t, st)
	backup := rw.dumpAfter(t, st, url, 5)
	rw.post(6)
	rw.waitAll(t, st)
	if meanwhile != nil {
		meanwhile(rw)
	}
	return rw, rw.restore(t, d, st, url, backup)
}
