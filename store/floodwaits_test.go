package store_test

import (
	"testing"
	"time"

	"stashd/store"
	"stashd/tg"
)

// A recorded flood wait is read back with what is left of it, an earlier
// end recorded later does not shorten it, each scope and chat is its own,
// and a wait that has ended is neither read nor kept.
func TestFloodWaits(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	for _, w := range []struct {
		scope store.FloodWaitScope
		chat  int64
		d     time.Duration
	}{
		{store.FloodWaitAll, 0, time.Hour},
		{store.FloodWaitAll, 0, time.Minute}, // ends earlier: the hour stays
		{store.FloodWaitSends, 5, 2 * time.Hour},
		{store.FloodWaitChat, -7, 3 * time.Hour},
		{store.FloodWaitChat, -8, time.Millisecond},
	} {
		if err := st.RecordFloodWait(ctx, "a", w.scope, tg.ChatID(w.chat), w.d); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RecordFloodWait(ctx, "b", store.FloodWaitAll, 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // the millisecond's wait has ended
	got, err := st.FloodWaits(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		scope store.FloodWaitScope
		chat  int64
		d     time.Duration
	}{{store.FloodWaitAll, 0, time.Hour}, {store.FloodWaitChat, -7, 3 * time.Hour}, {store.FloodWaitSends, 0, 2 * time.Hour}}
	if len(got) != len(want) {
		t.Fatalf("flood waits = %+v; want %d", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Scope != w.scope || int64(g.Chat) != w.chat || g.Left > w.d || g.Left < w.d-time.Minute {
			t.Errorf("flood wait %d = %+v; want %s of chat %d with about %v left", i, g, w.scope, w.chat, w.d)
		}
	}
	var rows int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM flood_waits WHERE account = 'a'`).Scan(&rows); err != nil || rows != 3 {
		t.Errorf("flood waits kept for a = %d (%v); want the 3 that run", rows, err)
	}
}

// The destinations an account has delivery intents open to are those of
// its intents not recorded as sent: not another account's, not a sent
// one's.
func TestIntentDestinations(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	first := onePartPackage(t, st, "first", 1, 1<<20)
	second := onePartPackage(t, st, "second", 2, 2<<20)
	for _, in := range []struct {
		pkg     int64
		dest    tg.ChatID
		account string
	}{{first, -300, "a"}, {second, -300, "a"}, {first, -400, "a"}, {first, -500, "b"}} {
		if _, err := st.EnsureIntents(ctx, in.pkg, in.dest, []int{0}, in.account); err != nil {
			t.Fatal(err)
		}
	}
	d, _, err := st.EnsureIntent(ctx, first, -400, 0, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkSent(ctx, d, tg.MessageIDFromServer(9)); err != nil {
		t.Fatal(err)
	}
	got, err := st.IntentDestinations(ctx, "a")
	if err != nil || len(got) != 1 || got[0] != -300 {
		t.Fatalf("open intents of a to %v (%v); want -300 alone", got, err)
	}
}

// A delivery an account took over from an account away is sent with the
// intent the away account wrote (its token, its row): that send may be
// pending in the taking account's TDLib database too, so the destination
// is one the taking account has an intent open to.
func TestIntentDestinationsHoldTheDeliveriesTakenOver(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	pkg := onePartPackage(t, st, "taken", 3, 3<<20)
	if err := st.WaitDelivery(ctx, store.Waiting{PackageID: pkg, Destination: -600, Account: "a", OpensAt: time.Now(),
		Parts: []tg.MessageKey{{Chat: -1, Message: 3 << 20}}, PartCount: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EnsureIntents(ctx, pkg, -600, []int{0}, "a"); err != nil {
		t.Fatal(err)
	}
	if n, _, err := st.TakeWaiting(ctx, "a", "b", "handed", []tg.ChatID{-1}, []tg.ChatID{-600}, time.Minute); err != nil || n != 1 {
		t.Fatalf("TakeWaiting = %d, %v; want 1", n, err)
	}
	// b's attempt reads the intent a wrote, and sends with its token.
	ins, err := st.EnsureIntents(ctx, pkg, -600, []int{0}, "b")
	if err != nil || len(ins) != 1 || ins[0].Fresh {
		t.Fatalf("b's intents %+v, %v; want a's, not a fresh one", ins, err)
	}
	got, err := st.IntentDestinations(ctx, "b")
	if err != nil || len(got) != 1 || got[0] != -600 {
		t.Fatalf("open intents of b to %v (%v); want -600, where b sends with the intent of a it took over", got, err)
	}
	if got, err := st.IntentDestinations(ctx, "a"); err != nil || len(got) != 1 || got[0] != -600 {
		t.Fatalf("open intents of a to %v (%v); want -600, where a's own send may be pending", got, err)
	}
}
