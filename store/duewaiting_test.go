package store_test

import (
	"crypto/sha256"
	"slices"
	"testing"
	"time"

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
