package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// stashd status shows the delivery backlog per destination with its drain
// time at the budget (2 parts at 20 a minute: 6 s), in the table and in
// --json, and a source whose catalogue is current but whose deliveries
// wait is not reported as a bare "synced".
func TestStatusShowsDeliveryBacklog(t *testing.T) {
	dbURL, _, w := queuedSet(t)
	dest := w.Destination
	out, rep := statusOf(t, dbURL)
	if !strings.Contains(out, "catalogue synced, 1 deliveries waiting") {
		t.Errorf("status does not say the source's deliveries wait:\n%s", out)
	}
	// The set's two parts go as one album: one send at 20 a minute.
	if !regexp.MustCompile(`(?m)^-1001000000500\s+1\s+2\s+a\s+20/min\s+~3s$`).MatchString(out) {
		t.Errorf("status has no backlog row for the destination (1 delivery, 2 parts, a, 20/min, ~3s):\n%s", out)
	}
	if len(rep.Backlog) != 1 || rep.Backlog[0].Destination != int64(dest) || rep.Backlog[0].Parts != 2 || rep.Backlog[0].Sends != 1 || rep.Backlog[0].DrainSeconds != 3 {
		t.Errorf("status --json backlog %+v, want destination %d with 2 parts in 1 send draining in 3 s", rep.Backlog, dest)
	}
	if len(rep.Sources) != 1 || rep.Sources[0].State != store.SourceDelivering || rep.Sources[0].DeliveriesDue != 1 {
		t.Errorf("status --json sources %+v, want the source delivering with 1 delivery due", rep.Sources)
	}
}

// queuedSet opens a fresh catalogue holding a source of account a (send
// budget 20 a minute) with one two-part package queued for a destination,
// due now: w.
func queuedSet(t *testing.T) (dbURL string, st *store.Store, w store.Waiting) {
	dbURL = pgtest.New(t)
	ctx := t.Context()
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	src := tg.ChatID(-1001000000007)
	dest := tg.ChatID(-1001000000500)
	if err := st.EnsureSource(ctx, store.Source{ChatID: src, Account: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveSourceState(ctx, src, false, "", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordSendRate(ctx, "a", 20); err != nil {
		t.Fatal(err)
	}
	hash := make([]byte, 32)
	hash[0] = 9
	k1, k2 := tg.MessageKey{Chat: src, Message: 1 << 20}, tg.MessageKey{Chat: src, Message: 2 << 20}
	id, _, err := st.CreatePackage(ctx, store.Package{ContentHash: hash, Name: "x.7z", Format: "7z", TotalSize: 2, PartCount: 2, Origin: k1},
		[]store.Part{{Index: 0, FileName: "x.7z.001", Size: 1, SHA256: hash, UniqueID: "x1", Source: k1},
			{Index: 1, FileName: "x.7z.002", Size: 1, SHA256: hash, UniqueID: "x2", Source: k2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w = store.Waiting{PackageID: id, Destination: dest, Account: "a", Parts: []tg.MessageKey{k1, k2},
		PartCount: 2, OpensAt: time.Now().Add(-time.Second)}
	if _, err := st.QueueDelivery(ctx, w); err != nil {
		t.Fatal(err)
	}
	return dbURL, st, w
}

// stashd status shows the deliveries a failure put off, with when they
// are tried again and why: a destination no account may post in holds
// its whole backlog. One that waits for its route's window afterwards is
// shown waiting for the window, not for the failure.
func TestStatusShowsDeliveriesPutOff(t *testing.T) {
	dbURL, st, w := queuedSet(t)
	dest := w.Destination
	cause := "deliver package 1 to -1001000000500: " + tg.ErrNoWriteAccess.Error() + " (400 Have no write access to the chat)"
	if n, err := st.HoldDestination(t.Context(), "a", dest, time.Now().Add(10*time.Minute), cause); err != nil || n != 1 {
		t.Fatalf("hold destination: %d deliveries, %v; want 1", n, err)
	}
	out, rep := statusOf(t, dbURL)
	if !regexp.MustCompile(`(?m)^destination -1001000000500 \(account a\): 1 deliveries put off until .+ after: .*no account may post in the destination`).MatchString(out) {
		t.Errorf("status does not show the deliveries put off and why:\n%s", out)
	}
	if len(rep.Deferred) != 1 || rep.Deferred[0].Destination != int64(dest) || rep.Deferred[0].Deliveries != 1 ||
		rep.Deferred[0].LastError != cause || time.Until(rep.Deferred[0].OpensAt) < 9*time.Minute {
		t.Errorf("status --json deferred %+v, want 1 delivery to %d put off 10 minutes with its cause", rep.Deferred, dest)
	}

	w.Route, w.OpensAt = "nights", time.Now().Add(time.Hour)
	if err := st.WaitDelivery(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	_, rep = statusOf(t, dbURL)
	if len(rep.Deferred) != 0 || len(rep.Waiting) != 1 || rep.Waiting[0].Route != "nights" {
		t.Errorf("status --json deferred %+v, waiting %+v; want the delivery waiting for route nights' window only", rep.Deferred, rep.Waiting)
	}
}

// statusOf runs stashd status on dbURL, as text and with --json.
func statusOf(t *testing.T, dbURL string) (string, store.Status) {
	t.Helper()
	dir := t.TempDir()
	code, out, stderr := run(t, dir, nil, "status", "--database-url", dbURL)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	code, js, stderr := run(t, dir, nil, "status", "--json", "--database-url", dbURL)
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, stderr)
	}
	var rep store.Status
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, js)
	}
	return out, rep
}
