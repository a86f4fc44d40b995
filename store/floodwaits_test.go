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
