package store_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func open(t *testing.T) *store.Store { return openConfig(t, store.Config{}) }

// openConfig opens a store with cfg on a fresh database of its own, closed
// when the test ends.
func openConfig(t testing.TB, cfg store.Config) *store.Store {
	t.Helper()
	cfg.URL = pgtest.New(t)
	st, err := store.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// onePartPackage catalogues a one-part zip, originally posted as message
// msg of chat -1, whose part is the file uniqueID; seed tells its content
// hash apart.
func onePartPackage(t *testing.T, st *store.Store, uniqueID string, seed byte, msg tg.MessageID) int64 {
	t.Helper()
	hash := make([]byte, 32)
	hash[0] = seed
	origin := tg.MessageKey{Chat: -1, Message: msg}
	pkg := store.Package{ContentHash: hash, Name: uniqueID + ".zip", Format: "zip", TotalSize: 1, PartCount: 1, Origin: origin}
	id, _, err := st.CreatePackage(t.Context(), pkg, []store.Part{{Index: 0, FileName: pkg.Name, Size: 1, SHA256: hash,
		UniqueID: uniqueID, Source: origin}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

var policy = store.ScanPolicy{ColdAfter: 3, ColdDelay: time.Hour, RetryDelay: time.Minute, CircuitBase: 10 * time.Minute, MaxDelay: 6 * time.Hour}

// Sources whose scans keep finding nothing turn cold and are scanned less
// often; a source with pending dead letters never does.
func TestEmptyScansMakeASourceCold(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	cold, busy := tg.ChatID(-1), tg.ChatID(-2)
	for _, c := range []tg.ChatID{cold, busy} {
		if err := st.EnsureSource(ctx, store.Source{ChatID: c, Account: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	err := st.RecordDeadLetter(ctx, store.DeadLetter{Key: tg.MessageKey{Chat: busy, Message: 1 << 20}, Account: "a",
		ErrorClass: "retryable", Reason: "x", NextAttemptAt: time.Now().Add(time.Hour)}, store.SourceMessage{})
	if err != nil {
		t.Fatal(err)
	}
	var srcCold, srcBusy store.Source
	for i := range 3 {
		if srcCold, err = st.FinishScan(ctx, cold, "", store.ScanOutcome{}, policy); err != nil {
			t.Fatal(err)
		}
		if srcBusy, err = st.FinishScan(ctx, busy, "", store.ScanOutcome{}, policy); err != nil {
			t.Fatal(err)
		}
		if i < 2 && time.Until(srcCold.NextScanAt) > time.Minute {
			t.Fatalf("source cold after %d empty scans, want after 3", i+1)
		}
	}
	if d := time.Until(srcCold.NextScanAt); d < 50*time.Minute {
		t.Errorf("cold source next scan in %v, want about the cold delay (1h)", d)
	}
	if srcBusy.EmptyScans != 0 || time.Until(srcBusy.NextScanAt) > time.Minute {
		t.Errorf("source with a pending dead letter = %d empty scans, next in %v; it must never be idle",
			srcBusy.EmptyScans, time.Until(srcBusy.NextScanAt))
	}
	// A scan that finds something warms the source up again.
	if srcCold, err = st.FinishScan(ctx, cold, "", store.ScanOutcome{Found: 2}, policy); err != nil {
		t.Fatal(err)
	}
	if srcCold.EmptyScans != 0 || time.Until(srcCold.NextScanAt) > time.Minute {
		t.Errorf("after a fruitful scan: %d empty scans, next in %v", srcCold.EmptyScans, time.Until(srcCold.NextScanAt))
	}
}

// Permanent failures open a circuit whose interval doubles; success closes it.
func TestPermanentFailuresOpenAGrowingCircuit(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	c := tg.ChatID(-3)
	if err := st.EnsureSource(ctx, store.Source{ChatID: c, Account: "a"}); err != nil {
		t.Fatal(err)
	}
	fail := store.ScanOutcome{Err: errors.New("CHANNEL_PRIVATE"), Permanent: true}
	var prev time.Duration
	for i := range 3 {
		src, err := st.FinishScan(ctx, c, "", fail, policy)
		if err != nil {
			t.Fatal(err)
		}
		open := time.Until(src.CircuitUntil)
		want := policy.CircuitBase << i
		if open < want-time.Minute || open > want+time.Minute {
			t.Errorf("failure %d: circuit open for %v, want about %v", i+1, open, want)
		}
		if open <= prev || src.LastError != "CHANNEL_PRIVATE" {
			t.Errorf("failure %d: circuit %v (before %v), error %q", i+1, open, prev, src.LastError)
		}
		prev = open
	}
	src, err := st.FinishScan(ctx, c, "", store.ScanOutcome{}, policy)
	if err != nil {
		t.Fatal(err)
	}
	if !src.CircuitUntil.IsZero() || src.Failures != 0 || src.LastError != "" {
		t.Errorf("after a success: circuit %v, failures %d, error %q; want closed", src.CircuitUntil, src.Failures, src.LastError)
	}
}

// Constraints, not only code, keep the catalogue exact.
func TestCatalogueConstraints(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	hash := make([]byte, 32)
	hash[0] = 1
	pkg := store.Package{ContentHash: hash, Name: "a.zip", Format: "zip", TotalSize: 1, PartCount: 1,
		Origin: tg.MessageKey{Chat: -1, Message: 1 << 20}}
	parts := []store.Part{{Index: 0, FileName: "a.zip", Size: 1, SHA256: hash, UniqueID: "u1", Source: pkg.Origin}}
	id, created, err := st.CreatePackage(ctx, pkg, parts, []store.FileEntry{{Path: "x"}})
	if err != nil || !created {
		t.Fatalf("create = %d %v %v", id, created, err)
	}
	again, created, err := st.CreatePackage(ctx, pkg, parts, nil)
	if err != nil || created || again != id {
		t.Fatalf("same content hash again = %d %v %v; want the existing package", again, created, err)
	}
	d1, fresh1, err := st.EnsureIntent(ctx, id, -9, 0, "a")
	if err != nil || !fresh1 {
		t.Fatal(err)
	}
	d2, fresh2, err := st.EnsureIntent(ctx, id, -9, 0, "b")
	if err != nil || fresh2 || d2.Token != d1.Token {
		t.Fatalf("second intent = %+v fresh %v; want the first one's token", d2, fresh2)
	}
	if _, err := st.Pool().Exec(ctx, `INSERT INTO deliveries (package_id, destination_chat_id, part_idx, token, account)
		VALUES ($1, -9, 0, 'other', 'a')`, id); err == nil {
		t.Error("a second delivery row for one package, destination and part was accepted")
	}
}

// A parked letter stays pending but leaves the retry timer; a waiting one
// is recorded so from the start.
func TestParkedAndWaitingDeadLettersAreNotDue(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	timed := tg.MessageKey{Chat: -5, Message: 1 << 20}
	waiting := tg.MessageKey{Chat: -5, Message: 2 << 20}
	past := time.Now().Add(-time.Hour)
	if err := st.RecordDeadLetter(ctx, store.DeadLetter{Key: timed, Account: "a", ErrorClass: "set_failed", Reason: "x", NextAttemptAt: past}, store.SourceMessage{}); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordDeadLetter(ctx, store.DeadLetter{Key: waiting, Account: "a", ErrorClass: "incomplete_set", Reason: "y", Waiting: true}, store.SourceMessage{}); err != nil {
		t.Fatal(err)
	}
	due, err := st.DueDeadLetters(ctx, "a", time.Now(), 10)
	if err != nil || len(due) != 1 || due[0].Key != timed {
		t.Fatalf("due = %+v, %v; want only the timed letter", due, err)
	}
	if err := st.ParkDeadLetter(ctx, timed); err != nil {
		t.Fatal(err)
	}
	if due, err := st.DueDeadLetters(ctx, "a", time.Now().Add(24*time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("due after parking = %+v, %v; want none", due, err)
	}
	pending, err := st.DeadLetters(ctx, store.DeadPending, 10)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending = %+v, %v; want both letters still pending", pending, err)
	}
}

// waitLockWaiters waits until n backends of st's database wait on a lock,
// or done has a value (which it puts back).
func waitLockWaiters(t *testing.T, st *store.Store, n int, done chan error) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			done <- err
			return
		default:
		}
		var waiting int
		if err := st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends never waited on a lock", n)
		}
	}
}
