package pgtrips

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A batch is named by its first statement past the ones that open its
// transaction, so that the batches of different work tell apart.
func TestBatchIsNamedByItsFirstStatementOfWork(t *testing.T) {
	var got []string
	tr := Tracer{Sent: func(what string) { got = append(got, what) }}
	for _, sqls := range [][]string{
		{"BEGIN", "SET LOCAL plan_cache_mode TO force_generic_plan", "INSERT INTO package_locks", "SELECT 1", "COMMIT"},
		{"SELECT 2", "SELECT 3"},
		{"BEGIN"},
		{"BEGIN", "SELECT set_config('enable_seqscan', 'off', true)", "SET LOCAL synchronous_commit TO off", "WITH upd AS", "COMMIT"},
	} {
		b := &pgx.Batch{}
		for _, q := range sqls {
			b.Queue(q)
		}
		tr.TraceBatchStart(context.Background(), nil, pgx.TraceBatchStartData{Batch: b})
	}
	want := []string{"batch of 5: INSERT INTO package_locks", "batch of 2: SELECT 2", "batch of 1: BEGIN", "batch of 5: WITH upd AS"}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("sent %q, want %q", got, want)
		}
	}
}
