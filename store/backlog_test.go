package store_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"stashd/store"
	"stashd/tg"
)

// The delivery backlog counts, per destination, the queued deliveries due
// now (not those held for a later time) and estimates the time to drain
// them as parts × 60 s over the send budgets of the accounts holding them;
// a source whose packages have deliveries due reads as delivering, not
// synced, until they are sent.
func TestDeliveryBacklog(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	srcA, srcB := tg.ChatID(-1), tg.ChatID(-2)
	for _, s := range []store.Source{{ChatID: srcA, Account: "a"}, {ChatID: srcB, Account: "b"}} {
		if err := st.EnsureSource(ctx, s); err != nil {
			t.Fatal(err)
		}
		// The catalogue is current: only the deliveries are behind.
		if err := st.SaveSourceState(ctx, s.ChatID, false, "", 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RecordSendRate(ctx, "a", 20); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordSendRate(ctx, "b", 10); err != nil {
		t.Fatal(err)
	}
	pkg := func(n int, src tg.ChatID, parts int) store.Waiting {
		hash := make([]byte, 32)
		hash[0] = byte(n)
		origin := tg.MessageKey{Chat: src, Message: tg.MessageID(n << 20)}
		var ps []store.Part
		var keys []tg.MessageKey
		for i := range parts {
			k := tg.MessageKey{Chat: src, Message: tg.MessageID((n*10 + i) << 20)}
			ps = append(ps, store.Part{Index: i, FileName: fmt.Sprintf("p%d.zip.%03d", n, i+1), Size: 1, SHA256: hash,
				UniqueID: fmt.Sprintf("u%d-%d", n, i), Source: k})
			keys = append(keys, k)
		}
		id, _, err := st.CreatePackage(ctx, store.Package{ContentHash: hash, Name: fmt.Sprintf("p%d.zip", n), Format: "zip",
			TotalSize: int64(parts), PartCount: parts, Origin: origin}, ps, nil)
		if err != nil {
			t.Fatal(err)
		}
		return store.Waiting{PackageID: id, Parts: keys, PartCount: parts, OpensAt: time.Now().Add(-time.Second)}
	}
	queue := func(w store.Waiting, dest tg.ChatID, account string) {
		w.Destination, w.Account = dest, account
		if _, err := st.QueueDelivery(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	p1, p2, p3 := pkg(1, srcA, 2), pkg(2, srcB, 3), pkg(3, srcA, 1)
	queue(p1, 100, "a")
	queue(p2, 100, "b")
	queue(p3, 200, "a")
	held := p3
	held.OpensAt = time.Now().Add(time.Hour) // a window opening later: not due
	queue(held, 300, "a")

	got, err := st.DeliveryBacklog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("backlog of %d destinations, want 2 (100 and 200; 300 waits for a window): %+v", len(got), got)
	}
	b100, b200 := got[0], got[1]
	// Each package is one send (an album of its parts).
	if b100.Destination != 100 || b100.Deliveries != 2 || b100.Parts != 5 || b100.Sends != 2 || !slices.Equal(b100.Accounts, []string{"a", "b"}) ||
		b100.SendRate != 30 || math.Abs(b100.DrainSeconds-4) > 1e-9 {
		t.Errorf("destination 100: %+v, want 2 deliveries, 5 parts in 2 sends, accounts a and b at 30/min, drain 4 s", b100)
	}
	if b200.Destination != 200 || b200.Deliveries != 1 || b200.Parts != 1 || b200.Sends != 1 || b200.SendRate != 20 || math.Abs(b200.DrainSeconds-3) > 1e-9 {
		t.Errorf("destination 200: %+v, want 1 delivery, 1 part at 20/min, drain 3 s", b200)
	}

	rep, err := st.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Backlog) != 2 {
		t.Errorf("status backlog %+v, want the 2 destinations", rep.Backlog)
	}
	state := func(rep store.Status) map[tg.ChatID]store.SourceStatus {
		m := map[tg.ChatID]store.SourceStatus{}
		for _, s := range rep.Sources {
			m[tg.ChatID(s.ChatID)] = s
		}
		return m
	}
	for chat, want := range map[tg.ChatID]int{srcA: 2, srcB: 1} {
		if s := state(rep)[chat]; s.State != store.SourceDelivering || s.DeliveriesDue != want {
			t.Errorf("source %d: state %q with %d deliveries due, want %q with %d", chat, s.State, s.DeliveriesDue, store.SourceDelivering, want)
		}
	}
	for _, w := range []struct {
		w    store.Waiting
		dest tg.ChatID
	}{{p1, 100}, {p2, 100}, {p3, 200}} {
		if err := st.ClearWaiting(ctx, w.w.PackageID, w.dest); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err = st.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if len(rep.Backlog) != 0 {
		t.Errorf("backlog after every due delivery left: %+v", rep.Backlog)
	}
	for _, chat := range []tg.ChatID{srcA, srcB} {
		if s := state(rep)[chat]; s.State != "synced" || s.DeliveriesDue != 0 {
			t.Errorf("source %d after its deliveries left: state %q, %d due; want synced", chat, s.State, s.DeliveriesDue)
		}
	}
}
