package store_test

import (
	"context"
	"crypto/sha256"
	"slices"
	"testing"
	"time"

	"stashd/store"
	"stashd/tg"
)

// TakeWaiting moves exactly the deliveries of one account queued from one
// of the sources to one of the destinations, keeping when they are due and
// counting their attempts afresh, and names the intents their sends left,
// which the taking account watches for the window given, across its
// restarts (LateSendsWatched).
func TestDeliveriesQueuedForAnotherAccountAreTaken(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	later := time.Now().Add(time.Hour).Truncate(time.Second)
	rows := []struct {
		pkg     int64
		account string
		source  int64
		dest    int64
	}{
		{1, "c", -5, -1},
		{2, "c", -5, -1}, // a second for c: c is named once
		{3, "a", -5, -2},
		{4, "b", -5, -1}, // the asking account's own
		{5, "d", -6, -1}, // another source
		{6, "e", -5, -3}, // another destination
		{7, "a", -6, -2}, // a's, from another source: stays
	}
	for _, r := range rows {
		h := sha256.Sum256([]byte{byte(r.pkg)})
		if _, err := st.Pool().Exec(ctx, `INSERT INTO packages (id, content_hash, name, format, total_size, part_count, file_count,
			origin_chat_id, origin_message_id) VALUES ($1, $2, 'p.zip', 'zip', 1, 1, 1, $3, $4)`, r.pkg, h[:], r.source, r.pkg<<20); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Pool().Exec(ctx, `INSERT INTO waiting_deliveries (package_id, destination_chat_id, account, route, opens_at,
			source_chat_id, message_ids, part_count, attempts, last_error)
			VALUES ($1, $2, $3, '', $4, $5, ARRAY[$6::bigint], 1, 3, 'FLOOD_WAIT')`,
			r.pkg, r.dest, r.account, later, r.source, r.pkg<<20); err != nil {
			t.Fatal(err)
		}
	}
	// The taken delivery's part 0 has an intent, its part 1 is sent; the
	// delivery that stays has an intent too.
	for _, d := range []struct {
		pkg, part    int
		token, state string
		msg          any
	}{{3, 0, "t3", "intent", nil}, {3, 1, "t3b", "sent", int64(9 << 20)}, {7, 0, "t7", "intent", nil}} {
		dest := map[int]int64{3: -2, 7: -2}[d.pkg]
		if _, err := st.Pool().Exec(ctx, `INSERT INTO deliveries (package_id, destination_chat_id, part_idx, token, state, dest_message_id, account)
			VALUES ($1, $2, $3, $4, $5, $6, 'a')`, d.pkg, dest, d.part, d.token, d.state, d.msg); err != nil {
			t.Fatal(err)
		}
	}
	sources, dests := []tg.ChatID{-5, -7}, []tg.ChatID{-2, -1}
	n, intents, err := st.TakeWaiting(ctx, "a", "b", "handed", sources, dests, time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("TakeWaiting = %d, %v; want 1", n, err)
	}
	if want := []store.TakenIntent{{Destination: -2, Token: "t3", Account: "a", Left: time.Hour}}; !slices.Equal(intents, want) {
		t.Errorf("intents left by the taken deliveries: %+v, want %+v", intents, want)
	}
	taken, err := st.AllWaiting(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, w := range taken {
		got = append(got, w.PackageID)
		if w.PackageID == 3 && (w.Route != "handed" || w.Attempts != 0 || !w.OpensAt.Equal(later)) {
			t.Errorf("taken delivery: route %q, attempts %d, opens %v; want handed, 0, %v", w.Route, w.Attempts, w.OpensAt, later)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []int64{3, 4}) {
		t.Errorf("b's queue after the take: %v, want [3 4]", got)
	}
	watched, err := st.LateSendsWatched(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(watched) != 1 || watched[0].Token != "t3" || watched[0].Destination != -2 || watched[0].Account != "a" ||
		watched[0].Left <= 0 || watched[0].Left > time.Hour {
		t.Errorf("b watches %+v after the take; want t3 in -2, sent by a, for at most an hour", watched)
	}
	if watched, err := st.LateSendsWatched(ctx, "a"); err != nil || len(watched) != 0 {
		t.Errorf("a watches %+v, %v; want nothing", watched, err)
	}
}

// A watch whose window has passed is not read back, and its row goes,
// whichever account it was.
func TestLateSendsWatchedOnlyWithinTheirWindow(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	for _, r := range []struct {
		token, account string
		until          string
	}{{"ended", "b", "-1 second"}, {"live", "b", "1 hour"}, {"other", "c", "-1 hour"}} {
		if _, err := st.Pool().Exec(ctx, `INSERT INTO late_sends (token, destination_chat_id, sender, account, until)
			VALUES ($1, -2, 'a', $2, now() + $3::interval)`, r.token, r.account, r.until); err != nil {
			t.Fatal(err)
		}
	}
	watched, err := st.LateSendsWatched(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(watched) != 1 || watched[0].Token != "live" {
		t.Errorf("b watches %+v; want only live", watched)
	}
	var left []string
	rows, err := st.Pool().Query(ctx, `SELECT token FROM late_sends ORDER BY token`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tok string
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		left = append(left, tok)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []string{"live"}) {
		t.Errorf("late_sends rows after the read: %v; want those whose watch has not ended, [live]", left)
	}
}

// The rows whose watch has ended are deleted in passing by every account's
// start and every take: one of them another transaction is deleting (or
// has locked) is left to it, so that no start or take waits on another,
// or deadlocks with it.
func TestLateSendsCleanupLeavesRowsLockedElsewhere(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	for _, tok := range []string{"ended-1", "ended-2"} {
		if _, err := st.Pool().Exec(ctx, `INSERT INTO late_sends (token, destination_chat_id, sender, account, until)
			VALUES ($1, -2, 'a', 'b', now() - interval '1 second')`, tok); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM late_sends WHERE token = 'ended-1'`); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := st.LateSendsWatched(rctx, "b"); err != nil {
		t.Fatalf("reading b's watch while another transaction deletes a lapsed row: %v; want it left to that transaction", err)
	}
	if _, _, err := st.TakeWaiting(rctx, "a", "b", "r", []tg.ChatID{-1}, []tg.ChatID{-2}, time.Minute); err != nil {
		t.Fatalf("a take while another transaction deletes a lapsed row: %v; want it left to that transaction", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM late_sends`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d late_sends rows left; want both lapsed rows deleted, one by each side", n)
	}
}
