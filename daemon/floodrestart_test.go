package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"stashd/daemon"
	"stashd/internal/pgtest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// restartFloodWait is a flood wait that outlives a restart of the daemon
// and ends within the test.
const restartFloodWait = 12 * time.Second

// waitPaused waits, bounded, until until reports a pause of account a of
// d that ends later than now, and returns its end.
func waitPaused(t *testing.T, d *daemon.Daemon, until func(*tg.Paced) time.Time) time.Time {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if p := daemon.AccountPaced(d, "a"); p != nil {
			if u := until(p); u.After(time.Now()) {
				return u
			}
		}
		if time.Now().After(deadline) {
			d.Kill()
			t.Fatal("the account was never paused by the injected flood wait")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noCallsBefore fails t if account a makes a request that count counts
// in calls made since before, seen before until; it returns once until
// has passed. A look counts only when it was over before until.
func noCallsBefore(t *testing.T, calls func() map[string]int, before map[string]int, until time.Time, count func(method string) bool) {
	t.Helper()
	for time.Now().Before(until) {
		now := calls()
		if !time.Now().Before(until) {
			return
		}
		for m, n := range now {
			if count(m) && n > before[m] {
				t.Fatalf("%d %s request(s) reached Telegram %v before the flood wait ended", n-before[m], m,
					time.Until(until).Round(time.Millisecond))
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A 429 that paused every request of an account holds the account after a
// restart too: the daemon is killed inside the wait, and the new one makes
// no request of the account until the wait has ended; then it catalogues
// what the first one could not.
func TestAccountFloodWaitOutlivesARestart(t *testing.T) {
	t.Parallel()
	testAccountFloodWaitOutlives(t, 27, restartSame)
}

// The instance that takes over an account whose owner died inside a flood
// wait honours the wait as well.
func TestAccountFloodWaitHoldsTheInstanceTakingOver(t *testing.T) {
	t.Parallel()
	testAccountFloodWaitOutlives(t, 29, restartTakeOver)
}

// A flood wait whose rows the database lost (restored from a dump taken
// before the 429, or failed over to a replica that had not seen them)
// still holds the account after a restart: the account's own directory
// keeps it too.
func TestAccountFloodWaitOutlivesItsLostRecord(t *testing.T) {
	t.Parallel()
	testAccountFloodWaitOutlives(t, 31, restartRowsLost)
}

// How testAccountFloodWaitOutlives restarts the account.
type restartKind int

const (
	restartSame     restartKind = iota // the same instance starts again
	restartTakeOver                    // another instance takes the account over
	restartRowsLost                    // the same instance, its data directory kept, the table's rows lost
)

func testAccountFloodWaitOutlives(t *testing.T, seed int64, kind restartKind) {
	st := openStore(t, poolConns)
	pr := newPair(t, seed, "a")
	world, src := pr.world, pr.src
	cfg := floodConfig(pr.accounts()[:1], pr.dest)
	cfg.Instance, cfg.LeaseTTL = "one", 3*time.Second
	if kind == restartRowsLost {
		cfg.DataDir = t.TempDir()
	}
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	world.InjectFloodWait("a", tg.MethodDownloadFile, restartFloodWait, 1)
	posted := postTars(world, src, "w", 1)
	until := waitPaused(t, d, (*tg.Paced).PausedUntil)
	if kind == restartRowsLost {
		waitFloodWaitRow(t, st, store.FloodWaitAll)
	}
	d.Kill()
	if kind == restartRowsLost {
		if _, err := st.Pool().Exec(t.Context(), `DELETE FROM flood_waits`); err != nil {
			t.Fatal(err)
		}
	}

	before := world.Calls("a")
	cfg.Registry = prometheus.NewRegistry()
	if kind == restartTakeOver {
		// It stands by until the dead owner's lease lapses, well
		// inside the wait.
		cfg.Instance = "two"
	}
	var logs lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	d = daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	noCallsBefore(t, func() map[string]int { return world.Calls("a") }, before, until, func(string) bool { return true })
	waitCatalogued(t, st, posted[0].Key())
	// The line saying why the start waits names the wait of every request,
	// not a re-send: the account had no send pending.
	var held string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "holds the account's start") {
			held = line
		}
	}
	if !strings.Contains(held, "scope=all") || strings.Contains(held, "re-send") {
		t.Errorf("the line saying why the account's start waits: %q; want it to name the wait of every request, and no re-send", held)
	}
}

// A 429 answering a send holds the account's sends after a restart too,
// whether or not the delivery it refused was put off before the stop: the
// daemon is killed as soon as the wait begins, and the new one sends
// nothing, a package posted after the restart included, until the wait
// has ended; then it delivers both.
func TestSendFloodWaitOutlivesARestart(t *testing.T) {
	t.Parallel()
	// The killed daemon may hold the first package's delivery lock: a
	// short lifetime lets the new one take it soon after the wait.
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t), MaxConns: 16, LockTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	pr := newPair(t, 28, "a")
	world, src, dest := pr.world, pr.src, pr.dest
	cfg := floodConfig(pr.accounts()[:1], dest)
	// The deliveries put off by the wait are looked at again soon after
	// it has ended.
	cfg.Delivery.Interval = time.Second
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	world.InjectFloodWait("a", tg.MethodSendMessage, restartFloodWait, 1)
	posted := postTars(world, src, "x", 1)
	until := waitPaused(t, d, (*tg.Paced).SendPausedUntil)
	d.Kill()

	before := world.Calls("a")
	cfg.Registry = prometheus.NewRegistry()
	d = daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	posted = append(posted, postTars(world, src, "y", 1)...)
	noCallsBefore(t, func() map[string]int { return world.Calls("a") }, before, until, tg.SendMethod)
	waitDocuments(t, world, dest, len(posted))
	checkOnce(t, world, dest, posted)
}

// A send refused by a destination's own limit (429 in
// updateMessageSendFailed) holds the account's sends there after a
// restart too: a package posted after the restart is put off by the wait
// without a send that the destination would refuse again.
func TestChatFloodWaitOutlivesARestart(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 30, "a")
	world, src, dest := pr.world, pr.src, pr.dest
	world.LimitChatSends(dest, 1.0/600, 1) // one send, then ten minutes
	cfg := floodConfig(pr.accounts()[:1], dest)
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	postTars(world, src, "c", 2)
	waitDestPaused(t, d, st, world, dest)
	// The pause is the session's at once; its record (the account's file,
	// then the table) is written right after. This test stops the daemon
	// once the wait is recorded; TestChatFloodWaitOutlivesAnUnrecordedPause
	// covers a record lost.
	waitFloodWaitRow(t, st, store.FloodWaitChat)
	d.Kill()

	cfg.Registry = prometheus.NewRegistry()
	d = daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	third := postTars(world, src, "e", 1)[0]
	waitCatalogued(t, st, third.Key())
	// Both packages the destination has not taken are put off by its
	// wait: the one refused before the stop (if the stop did not come
	// first) and the one posted after it.
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM waiting_deliveries WHERE opens_at > now() + interval '1 minute'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries put off by the destination's wait; want 2. The queue:\n%s", n, queueRows(t, st))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := world.ChatFlooded(dest); n != 1 {
		t.Errorf("the destination refused %d sends after the restart: the account sent inside its wait", n-1)
	}
}

// waitFloodWaitRow waits, bounded, until account a's flood wait of scope
// is in flood_waits: the write a test then undoes has happened.
func waitFloodWaitRow(t *testing.T, st *store.Store, scope store.FloodWaitScope) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM flood_waits WHERE account = 'a' AND scope = $1`, string(scope)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flood wait of scope %s was never recorded", scope)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A destination's wait whose write the database refused (down at the
// 429; the write runs beside the session's pump, so a stop right after
// the 429 loses it the same way) still holds the account's sends there
// after a restart.
func TestChatFloodWaitOutlivesAnUnrecordedPause(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	ctx := context.Background()
	// Every write of a flood wait fails, as with the database unreachable.
	if _, err := st.Pool().Exec(ctx, `
		CREATE FUNCTION refuse_flood_waits() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'the database is unreachable'; END $$;
		CREATE TRIGGER refuse_flood_waits BEFORE INSERT OR UPDATE ON flood_waits
		FOR EACH ROW EXECUTE FUNCTION refuse_flood_waits()`); err != nil {
		t.Fatal(err)
	}
	pr := newPair(t, 32, "a")
	world, src, dest := pr.world, pr.src, pr.dest
	world.LimitChatSends(dest, 1.0/600, 1) // one send, then ten minutes
	cfg := floodConfig(pr.accounts()[:1], dest)
	cfg.DataDir = t.TempDir()
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	postTars(world, src, "c", 2)
	waitDestPaused(t, d, st, world, dest)
	// The stop waits for the pause's write, which fails.
	d.Kill()
	if _, err := st.Pool().Exec(ctx, `DROP TRIGGER refuse_flood_waits ON flood_waits`); err != nil {
		t.Fatal(err)
	}

	cfg.Registry = prometheus.NewRegistry()
	d = daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	third := postTars(world, src, "e", 1)[0]
	waitCatalogued(t, st, third.Key())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM waiting_deliveries WHERE opens_at > now() + interval '1 minute'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries put off by the destination's wait; want 2 (refused: %d)", n, world.ChatFlooded(dest))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := world.ChatFlooded(dest); n != 1 {
		t.Errorf("the destination refused %d sends after the restart: the account sent inside its wait", n-1)
	}
}

// lockedBuffer is a log sink the daemon's goroutines may write to while
// the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An account's flood-wait file that is damaged, another account's, or
// holds an end no wait of Telegram's reaches neither stops the account
// nor holds it: it is ignored, with a line saying so.
func TestFloodWaitFileDamagedOrForeignIsIgnored(t *testing.T) {
	t.Parallel()
	far := time.Now().Add(90 * 24 * time.Hour).UTC().Format(time.RFC3339Nano)
	soon := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	for _, c := range []struct {
		name, content string
		fifo          bool // a named pipe nobody writes to, in place of the file
	}{
		{name: "damaged", content: `{"format":"stashd flood waits 1","account":"a","waits":[{"scope":`},
		{name: "foreign", content: `{"format":"something else","waits":[{"scope":"all","until":"` + soon + `"}]}`},
		{name: "another account's", content: `{"format":"stashd flood waits 1","account":"b","waits":[{"scope":"all","until":"` + soon + `"}]}`},
		{name: "implausibly late", content: `{"format":"stashd flood waits 1","account":"a","waits":[{"scope":"all","until":"` + far + `"}]}`},
		{name: "a named pipe", fifo: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := openStore(t, poolConns)
			pr := newPair(t, 33, "a")
			cfg := floodConfig(pr.accounts()[:1], pr.dest)
			cfg.DataDir = t.TempDir()
			dir := filepath.Join(cfg.DataDir, "accounts", "a")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "flood_waits.json")
			var unblocked atomic.Bool
			if c.fifo {
				if err := syscall.Mkfifo(path, 0o600); err != nil {
					t.Fatal(err)
				}
				// A start that waits on the pipe is let go after a
				// minute, and fails the test below.
				started := make(chan struct{})
				defer close(started)
				go func() {
					select {
					case <-started:
					case <-time.After(time.Minute):
						unblocked.Store(true)
						if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
							w.Close()
						}
					}
				}()
			} else if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs lockedBuffer
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			d := daemon.New(cfg, st, pr.dial)
			prepareAndRun(t, d)
			defer d.Kill()
			if unblocked.Load() {
				t.Errorf("the account's start waited a minute on a named pipe in place of its flood-wait file")
			}
			posted := postTars(pr.world, pr.src, "p", 1)
			waitCatalogued(t, st, posted[0].Key())
			if !strings.Contains(logs.String(), "flood-wait file") {
				t.Errorf("no line says the flood-wait file was ignored; logs:\n%s", logs.String())
			}
		})
	}
}

// A flood wait is written to the account's directory as it starts, in a
// file only the daemon's user may read, holding the wait's end in UTC and
// nothing else of the account's.
func TestFloodWaitFileIsWrittenPrivately(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 34, "a")
	cfg := floodConfig(pr.accounts()[:1], pr.dest)
	cfg.DataDir = t.TempDir()
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	pr.world.InjectFloodWait("a", tg.MethodDownloadFile, 3*time.Second, 1)
	postTars(pr.world, pr.src, "w", 1)
	until := waitPaused(t, d, (*tg.Paced).PausedUntil)
	waitFloodWaitRow(t, st, store.FloodWaitAll) // written after the file

	dir := filepath.Join(cfg.DataDir, "accounts", "a")
	path := filepath.Join(dir, "flood_waits.json")
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != want {
			t.Errorf("%s has mode %o; want %o", p, perm, want)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Format  string `json:"format"`
		Account string `json:"account"`
		Waits   []struct {
			Scope string `json:"scope"`
			Chat  int64  `json:"chat"`
			Until string `json:"until"`
		} `json:"waits"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if len(f.Waits) != 1 || f.Waits[0].Scope != "all" || f.Waits[0].Chat != 0 {
		t.Fatalf("the file holds %s; want the one wait of every request", b)
	}
	end, err := time.Parse(time.RFC3339Nano, f.Waits[0].Until)
	if err != nil || !strings.HasSuffix(f.Waits[0].Until, "Z") {
		t.Fatalf("the wait's end %q is not a UTC time (%v)", f.Waits[0].Until, err)
	}
	if off := end.Sub(until); off < -time.Second || off > time.Second {
		t.Errorf("the file says the wait ends at %v; the account's pause ends at %v", end, until)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the account's directory holds %d entries; want the file alone (no temporary one left)", len(entries))
	}
}

// A running account whose flood wait the database lost (a dump restored
// under it, a failover to a replica that lagged, or the database down at
// the 429) records it again while the wait runs: an instance taking the
// account over after this one dies honours it too.
func TestRunningAccountRecordsALostFloodWaitAgain(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 35, "a")
	cfg := floodConfig(pr.accounts()[:1], pr.dest)
	cfg.DataDir = t.TempDir()
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	pr.world.InjectFloodWait("a", tg.MethodDownloadFile, 10*time.Minute, 1)
	postTars(pr.world, pr.src, "w", 1)
	waitPaused(t, d, (*tg.Paced).PausedUntil)
	waitFloodWaitRow(t, st, store.FloodWaitAll)
	if _, err := st.Pool().Exec(t.Context(), `DELETE FROM flood_waits`); err != nil {
		t.Fatal(err)
	}
	waitFloodWaitRow(t, st, store.FloodWaitAll)
	var left float64
	if err := st.Pool().QueryRow(t.Context(), `SELECT extract(epoch FROM until - now()) FROM flood_waits WHERE account = 'a'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left < 5*60 {
		t.Errorf("the wait recorded again ends in %.0f s; want what is left of the ten minutes", left)
	}
}

// A flood wait's end is kept in the account's file by the wall clock. A
// clock that was ahead when the wait was written (a host that booted with
// its hardware clock hours fast, then stepped back by NTP) makes that end
// look hours away: the account's next start must hold it no longer than
// Telegram asked, nor record that length in the table, where it would
// hold every instance taking the account over.
func TestFloodWaitFileAfterAClockStepBackHoldsNoLongerThanAsked(t *testing.T) {
	t.Parallel()
	const asked = time.Minute
	st := openStore(t, poolConns)
	pr := newPair(t, 36, "a")
	cfg := floodConfig(pr.accounts()[:1], pr.dest)
	cfg.DataDir = t.TempDir()
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	pr.world.InjectFloodWait("a", tg.MethodDownloadFile, asked, 1)
	postTars(pr.world, pr.src, "w", 1)
	waitPaused(t, d, (*tg.Paced).PausedUntil)
	waitFloodWaitRow(t, st, store.FloodWaitAll)
	d.Kill()

	// The file as a clock three hours fast would have written it.
	path := filepath.Join(cfg.DataDir, "accounts", "a", "flood_waits.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	waits, _ := f["waits"].([]any)
	if len(waits) != 1 {
		t.Fatalf("the file holds %s; want one wait", b)
	}
	w := waits[0].(map[string]any)
	until, err := time.Parse(time.RFC3339Nano, w["until"].(string))
	if err != nil {
		t.Fatal(err)
	}
	w["until"] = until.Add(3 * time.Hour).UTC().Format(time.RFC3339Nano)
	if b, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	cfg.Registry = prometheus.NewRegistry()
	d = daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	var left float64
	if err := st.Pool().QueryRow(t.Context(), `SELECT coalesce(max(extract(epoch FROM until - now())), 0) FROM flood_waits WHERE account = 'a'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left > asked.Seconds() {
		t.Errorf("after the clock stepped back the table holds the account %.0f s more; Telegram asked for %v", left, asked)
	}
}

// The session's update pump goes on while a chat's pause is written to
// the account's file: a write that does not complete (a disk stalled in
// fsync, a hung mount; here a FIFO no one reads in place of the
// temporary file) must not stop the account from taking in its updates.
func TestChatFloodWaitFileWriteDoesNotHoldThePump(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 37, "a")
	world, src, dest := pr.world, pr.src, pr.dest
	world.LimitChatSends(dest, 1.0/600, 1) // one send, then ten minutes
	cfg := floodConfig(pr.accounts()[:1], dest)
	cfg.DataDir = t.TempDir()
	dir := filepath.Join(cfg.DataDir, "accounts", "a")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "flood_waits.json.tmp")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	// Lets the write through at the end, so that the stop does not wait
	// for it for ever.
	defer func() {
		fh, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return
		}
		go func() {
			defer fh.Close()
			_, _ = io.Copy(io.Discard, fh)
		}()
	}()
	postTars(world, src, "c", 2)
	deadline := time.Now().Add(30 * time.Second)
	for daemon.DestPause(d, "a", dest) < time.Minute {
		if time.Now().After(deadline) {
			t.Fatalf("the destination never paused the account's sends (refused: %d)", world.ChatFlooded(dest))
		}
		time.Sleep(5 * time.Millisecond)
	}
	third := postTars(world, src, "e", 1)[0]
	waitCatalogued(t, st, third.Key())
}

// waitDestPaused waits until dest's send limit has paused account a's
// sends there for a minute or more (killing d and failing after thirty
// seconds).
func waitDestPaused(t *testing.T, d *daemon.Daemon, st *store.Store, world *tgsim.World, dest tg.ChatID) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for daemon.DestPause(d, "a", dest) < time.Minute {
		if time.Now().After(deadline) {
			d.Kill()
			t.Fatalf("the destination never paused the account's sends (refused: %d)", world.ChatFlooded(dest))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// And the refused send's intent settled: a stop while it is open
	// leaves a send TDLib may hold pending there, and the restart then
	// holds the whole account for the wait (clientHold), which is not
	// what these tests look at.
	for {
		open, err := st.IntentDestinations(t.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		if len(open) == 0 {
			return
		}
		if time.Now().After(deadline) {
			d.Kill()
			t.Fatalf("the refused send's intent is still open (destinations %v)", open)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// queueRows describes the delivery queue's rows, for a failure's message.
func queueRows(t *testing.T, st *store.Store) string {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(), `SELECT package_id, account, opens_at - now(), attempts, last_error
		FROM waiting_deliveries ORDER BY package_id`)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	var (
		pkg      int64
		account  string
		in       time.Duration
		attempts int
		last     string
	)
	_, err = pgx.ForEachRow(rows, []any{&pkg, &account, &in, &attempts, &last}, func() error {
		fmt.Fprintf(&b, "package %d, account %s, due in %s, %d attempts, last error %q\n", pkg, account, in.Round(time.Second), attempts, last)
		return nil
	})
	if err != nil {
		return err.Error()
	}
	return b.String()
}
