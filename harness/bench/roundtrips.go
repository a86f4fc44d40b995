package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// roundTrips counts what a store's connections send to PostgreSQL: each
// statement (a transaction's BEGIN and COMMIT included), each batch and
// each COPY is at least one round trip. A statement's first use on a
// connection also prepares it, one more round trip not counted here, so
// the count is a floor. It also counts them by what was sent (a
// statement's first words, a batch by its statements', a COPY by its
// table), for the table of where the round trips go.
type roundTrips struct {
	n     atomic.Int64
	mu    sync.Mutex
	bySQL map[string]int64
}

func (c *roundTrips) add(what string) {
	c.n.Add(1)
	c.mu.Lock()
	if c.bySQL == nil {
		c.bySQL = map[string]int64{}
	}
	c.bySQL[what]++
	c.mu.Unlock()
}

// snapshot returns the counts by statement so far.
func (c *roundTrips) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.bySQL))
	for k, v := range c.bySQL {
		out[k] = v
	}
	return out
}

// table returns the counts by statement between two snapshots, divided by
// per, most frequent first, the ones below min per left out.
func tripTable(before, after map[string]int64, per float64, min float64) string {
	type row struct {
		what string
		n    float64
	}
	var rows []row
	for k, v := range after {
		if d := float64(v-before[k]) / per; d >= min {
			rows = append(rows, row{k, d})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.what, b.what)) })
	var sb strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&sb, "%6.2f  %s\n", r.n, r.what)
	}
	return sb.String()
}

// statementName is the first words of a statement, enough to tell it
// from the others.
func statementName(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	if len(s) > 90 {
		s = s[:90]
	}
	return s
}

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.add(statementName(d.SQL))
	return ctx
}

func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	what := "batch"
	if d.Batch != nil && len(d.Batch.QueuedQueries) > 0 {
		what = fmt.Sprintf("batch of %d: %s", len(d.Batch.QueuedQueries), statementName(d.Batch.QueuedQueries[0].SQL))
	}
	c.add(what)
	return ctx
}

func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *roundTrips) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	c.add("COPY " + d.TableName.Sanitize())
	return ctx
}

func (c *roundTrips) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}
