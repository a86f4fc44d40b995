package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/store"
	"stashd/tg"
)

// waitingBacklog is the size of the queue BenchmarkDueWaiting reads.
const waitingBacklog = 100_000

// The states loadWaiting leaves the blocked deliveries in.
const (
	blockedHeld     = "held"      // due, to a destination DueWaiting is told to pass
	blockedPutOff   = "put off"   // put off by a flood wait for another hour
	blockedDueAgain = "due again" // put off by a flood wait that has passed
	blockedWindow   = "window"    // waiting for a route's window an hour away
	blockedMixed    = "mixed"     // put off for an hour, but for one due again
)

// loadWaiting queues waitingBacklog deliveries of account "a", oldest
// first: the oldest blocked of them to destination -1, in state, the rest
// due to -2.
func loadWaiting(ctx context.Context, b *testing.B, pool interface {
	CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error)
}, blocked int, state string) {
	b.Helper()
	now := time.Now()
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"packages"},
		[]string{"id", "content_hash", "name", "format", "total_size", "part_count", "file_count", "origin_chat_id", "origin_message_id"},
		copyRows(waitingBacklog, func(i int) []any {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(i))
			h := sha256.Sum256(n[:])
			return []any{int64(i), h[:], "p.zip", "zip", int64(1), 1, 1, int64(-5), int64(i) << 20}
		}))
	if err != nil {
		b.Fatal(err)
	}
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"waiting_deliveries"},
		[]string{"package_id", "destination_chat_id", "account", "route", "opens_at", "source_chat_id", "message_ids", "part_count", "created_at", "attempts", "last_error"},
		copyRows(waitingBacklog, func(i int) []any {
			created := now.Add(-time.Duration(waitingBacklog-i) * time.Second)
			dest, route, opens, attempts, last := int64(-2), "", created, 0, ""
			if i <= blocked {
				dest = -1
				switch state {
				case blockedPutOff:
					opens, attempts, last = now.Add(time.Hour), 1, "FLOOD_WAIT"
				case blockedDueAgain:
					opens, attempts, last = now.Add(-time.Minute), 1, "FLOOD_WAIT"
				case blockedWindow:
					route, opens = "nightly", now.Add(time.Hour)
				case blockedMixed:
					opens, attempts, last = now.Add(time.Hour), 1, "FLOOD_WAIT"
					if i == blocked {
						opens = now.Add(-time.Minute)
					}
				}
			}
			return []any{int64(i), dest, "a", route, opens, int64(-5), []int64{int64(i)}, 1, created, attempts, last}
		}))
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDueWaiting reads the delivery stage's next batch (100 due
// deliveries, oldest first) from a queue of 100,000 whose oldest 90,000
// go to one destination: put off by a flood wait, the same once the wait
// passed (they are then the batch), or held for this run (DueWaiting's
// except). It prints the plan of the read. Printed, not asserted.
func BenchmarkDueWaiting(b *testing.B) {
	for _, state := range []string{blockedPutOff, blockedDueAgain, blockedHeld, blockedWindow, blockedMixed} {
		b.Run(strings.ReplaceAll(state, " ", "-"), func(b *testing.B) {
			st := openConfig(b, store.Config{})
			ctx := context.Background()
			loadWaiting(ctx, b, st.Pool(), 90_000, state)
			if _, err := st.Pool().Exec(ctx, `ANALYZE waiting_deliveries`); err != nil {
				b.Fatal(err)
			}
			var except []tg.ChatID
			if state == blockedHeld {
				except = []tg.ChatID{-1}
			}
			skip := []int64{}
			for _, d := range except {
				skip = append(skip, int64(d))
			}
			rows, err := st.Pool().Query(ctx, `EXPLAIN (ANALYZE, BUFFERS) `+store.DueWaitingSQL, "a", time.Now(), 100, skip)
			if err != nil {
				b.Fatal(err)
			}
			plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				b.Fatal(err)
			}
			for _, l := range plan {
				b.Log(l)
			}
			b.ResetTimer()
			for range b.N {
				due, err := st.DueWaiting(ctx, "a", time.Now(), 100, except...)
				want := tg.ChatID(-2)
				if state == blockedDueAgain || state == blockedMixed {
					want = -1
				}
				if err != nil || len(due) != 100 || due[0].Destination != want {
					b.Fatalf("DueWaiting = %d rows (%v)", len(due), err)
				}
			}
		})
	}
}

// copyRows is a CopyFrom source of n rows, row(1) … row(n).
func copyRows(n int, row func(i int) []any) pgx.CopyFromSource {
	i := 0
	return pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		i++
		return row(i), nil
	})
}

// BenchmarkHoldDestination puts off the 100 deliveries to one destination
// of a queue of 100,000 whose other 99,900 go to another, as a flood wait
// or a refused destination does, and puts them back (the next hold finds
// them due again). Printed, not asserted.
func BenchmarkHoldDestination(b *testing.B) {
	const others = waitingBacklog - 100
	st := openConfig(b, store.Config{})
	ctx := context.Background()
	loadWaiting(ctx, b, st.Pool(), others, blockedWindow)
	if _, err := st.Pool().Exec(ctx, `UPDATE waiting_deliveries SET route = '', opens_at = created_at; ANALYZE waiting_deliveries`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		n, err := st.HoldDestination(ctx, "a", -2, time.Now().Add(time.Hour), "FLOOD_WAIT")
		if err != nil || n != waitingBacklog-others {
			b.Fatalf("HoldDestination = %d, %v", n, err)
		}
		b.StopTimer()
		if _, err := st.Pool().Exec(ctx, `UPDATE waiting_deliveries SET opens_at = created_at, last_error = '' WHERE destination_chat_id = -2`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
