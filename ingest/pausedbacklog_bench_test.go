package ingest_test

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/ingest"
	"stashd/tg"
)

// BenchmarkPausedDestinationBacklog prints what the delivery stage spends
// putting off a backlog of 2,000 deliveries to a destination a flood wait
// pauses: the time of one RunOnce over it, per delivery. Printed, not
// asserted.
func BenchmarkPausedDestinationBacklog(b *testing.B) {
	const n = 2000
	e := newEnvB(b)
	p, _, _ := e.pipelineWith("a", func(cfg *ingest.Config) {
		cfg.DestPause = func(dest tg.ChatID) time.Duration { return time.Hour }
	}, nil)
	stage := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil)
	for range b.N {
		b.StopTimer()
		if _, err := e.st.Pool().Exec(e.ctx, `TRUNCATE packages CASCADE`); err != nil {
			b.Fatal(err)
		}
		_, err := e.st.Pool().CopyFrom(e.ctx, pgx.Identifier{"packages"},
			[]string{"id", "content_hash", "name", "format", "total_size", "part_count", "file_count", "origin_chat_id", "origin_message_id"},
			pgx.CopyFromFunc(func() func() ([]any, error) {
				i := 0
				return func() ([]any, error) {
					if i == n {
						return nil, nil
					}
					i++
					var k [8]byte
					binary.BigEndian.PutUint64(k[:], uint64(i))
					h := sha256.Sum256(k[:])
					return []any{int64(i), h[:], "p.zip", "zip", int64(1), 1, 1, int64(e.src["a"]), int64(i) << 20}, nil
				}
			}()))
		if err != nil {
			b.Fatal(err)
		}
		_, err = e.st.Pool().Exec(e.ctx, `INSERT INTO waiting_deliveries (package_id, destination_chat_id, account, route, opens_at,
				source_chat_id, message_ids, part_count, created_at)
			SELECT id, $1, 'a', '', now() - interval '1 hour', $2, ARRAY[origin_message_id], 1, now() - interval '1 hour' + id * interval '1 ms'
			FROM packages`, int64(e.dest), int64(e.src["a"]))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		res, err := stage.RunOnce(e.ctx)
		took := time.Since(start)
		if err != nil || res.Deferred != n {
			b.Fatalf("RunOnce = %+v, %v; want all %d put off", res, err, n)
		}
		b.ReportMetric(float64(took.Microseconds())/n, "µs/delivery")
		b.Logf("%d deliveries to a paused destination put off in %v (%v each)", n, took, took/n)
	}
}
