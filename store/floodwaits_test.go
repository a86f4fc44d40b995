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
