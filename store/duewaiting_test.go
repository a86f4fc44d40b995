package store_test

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/store"
	"stashd/tg"
)

// DueWaiting merges, by age, the due deliveries no failure put off with the
// due ones a failure put off (read through their own index), and leaves
// out those put off until later and those to the destinations excepted.
func TestDueWaitingMergesPutOffDeliveriesByAge(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Second)
	rows := []struct {
		pkg     int64
		dest    int64
		created time.Duration // before now
		opens   time.Duration // after now
		err     string
	}{
		{1, -1, 5 * time.Second, -time.Second, "FLOOD_WAIT"}, // put off, due again
		{2, -1, 4 * time.Second, -4 * time.Second, ""},
		{3, -2, 3 * time.Second, time.Hour, "FLOOD_WAIT"}, // put off for an hour
		{4, -3, 2 * time.Second, -2 * time.Second, ""},    // excepted below
		{5, -1, time.Second, -time.Second, ""},
		{6, -2, time.Second / 2, -time.Second / 4, "CHAT_WRITE_FORBIDDEN"},
	}
	for _, r := range rows {
		h := sha256.Sum256([]byte{byte(r.pkg)})
		if _, err := st.Pool().Exec(ctx, `INSERT INTO packages (id, content_hash, name, format, total_size, part_count, file_count,
			origin_chat_id, origin_message_id) VALUES ($1, $2, 'p.zip', 'zip', 1, 1, 1, -5, $3)`, r.pkg, h[:], r.pkg<<20); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Pool().Exec(ctx, `INSERT INTO waiting_deliveries (package_id, destination_chat_id, account, route, opens_at,
			source_chat_id, message_ids, part_count, created_at, attempts, last_error)
			VALUES ($1, $2, 'a', '', $3, -5, ARRAY[$6::bigint], 1, $4, 0, $5)`,
			r.pkg, r.dest, now.Add(r.opens), now.Add(-r.created), r.err, r.pkg<<20); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		limit  int
		except []tg.ChatID
		want   []int64
	}{
		{10, nil, []int64{1, 2, 4, 5, 6}},
		{10, []tg.ChatID{-3}, []int64{1, 2, 5, 6}},
		{2, nil, []int64{1, 2}},
		{3, []tg.ChatID{-1}, []int64{4, 6}},
	} {
		due, err := st.DueWaiting(ctx, "a", now, c.limit, c.except...)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, w := range due {
			got = append(got, w.PackageID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("DueWaiting(limit %d, except %v) = %v, want %v", c.limit, c.except, got, c.want)
		}
	}
}

// A backlog waiting for a route's window costs a batch read nothing: the
// read of the due deliveries neither passes the deliveries whose window
// has not opened, one by one, nor sorts every due one, however many of
// either are queued. Once the window opens, its deliveries are due, oldest
// first.
func TestDueWaitingReadsNoDeliveryWaitingForItsWindow(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	const windowed, due, batch = 3000, 1000, 100
	now := time.Now().Truncate(time.Second)
	opens := now.Add(time.Hour)
	if _, err := st.Pool().CopyFrom(ctx, pgx.Identifier{"packages"},
		[]string{"id", "content_hash", "name", "format", "total_size", "part_count", "file_count", "origin_chat_id", "origin_message_id"},
		copyRows(windowed+due, func(i int) []any {
			h := sha256.Sum256([]byte(fmt.Sprint(i)))
			return []any{int64(i), h[:], "p.zip", "zip", int64(1), 1, 1, int64(-5), int64(i) << 20}
		})); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().CopyFrom(ctx, pgx.Identifier{"waiting_deliveries"},
		[]string{"package_id", "destination_chat_id", "account", "route", "opens_at", "source_chat_id", "message_ids", "part_count", "created_at"},
		copyRows(windowed+due, func(i int) []any {
			created := now.Add(-time.Duration(windowed+due-i) * time.Second)
			route, at := "nightly", opens // the oldest wait for the window
			if i > windowed {
				route, at = "", created
			}
			return []any{int64(i), int64(-1), "a", route, at, int64(-5), []int64{int64(i) << 20}, 1, created}
		})); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `ANALYZE waiting_deliveries`); err != nil {
		t.Fatal(err)
	}
	var plan []map[string]any
	if err := st.Pool().QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+store.DueWaitingSQL, "a", now, batch, []int64{}).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if read := scanRows(plan[0]["Plan"]); read > 2*batch {
		t.Errorf("reading a batch of %d due deliveries read %d rows of the queue, %d of them waiting for a window an hour away; want at most %d",
			batch, read, windowed, 2*batch)
	}
	for _, c := range []struct {
		at   time.Time
		want int
		head int64
	}{{now, batch, windowed + 1}, {opens, batch, 1}} {
		got, err := st.DueWaiting(ctx, "a", c.at, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want || got[0].PackageID != c.head {
			t.Errorf("DueWaiting at %v = %d deliveries, first %d; want %d, first %d", c.at, len(got), got[0].PackageID, c.want, c.head)
		}
	}
}

// scanRows sums the rows a plan's scans read, those their filter left
// out included, over their loops.
func scanRows(node any) int {
	n, _ := node.(map[string]any)
	sum := 0
	if typ, _ := n["Node Type"].(string); strings.Contains(typ, "Scan") {
		rows, _ := n["Actual Rows"].(float64)
		removed, _ := n["Rows Removed by Filter"].(float64)
		loops, _ := n["Actual Loops"].(float64)
		sum = int((rows + removed) * max(loops, 1))
	}
	plans, _ := n["Plans"].([]any)
	for _, p := range plans {
		sum += scanRows(p)
	}
	return sum
}
