// Package pgtrips counts the round trips pgx connections make to
// PostgreSQL: a Tracer set as a store's (or a pool's) tracer calls its
// function once for each statement, batch and COPY sent, with what was
// sent. A statement's first use on a connection also prepares it, a round
// trip not reported, so a count made of them is a floor.
package pgtrips

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Tracer reports each round trip to Sent: a statement by its SQL, a batch
// as "batch of N: " and the SQL of its first statement past those that
// open a transaction (BEGIN, and the settings made by SET LOCAL or
// set_config), a COPY as "COPY " and its table.
type Tracer struct {
	Sent func(what string)
}

var (
	_ pgx.QueryTracer    = Tracer{}
	_ pgx.BatchTracer    = Tracer{}
	_ pgx.CopyFromTracer = Tracer{}
)

func (t Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.Sent(d.SQL)
	return ctx
}

func (Tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (t Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	what := "batch"
	if d.Batch != nil && len(d.Batch.QueuedQueries) > 0 {
		qs := d.Batch.QueuedQueries
		first := qs[0].SQL
		for _, q := range qs {
			if first = q.SQL; !opening(first) {
				break
			}
		}
		what = fmt.Sprintf("batch of %d: %s", len(qs), first)
	}
	t.Sent(what)
	return ctx
}

// opening reports whether sql is one of the statements that open a
// transaction: BEGIN, or a setting.
func opening(sql string) bool {
	for _, p := range []string{"BEGIN", "SET LOCAL", "SELECT set_config("} {
		if strings.HasPrefix(sql, p) {
			return true
		}
	}
	return false
}

func (Tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (Tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (t Tracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	t.Sent("COPY " + d.TableName.Sanitize())
	return ctx
}

func (Tracer) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}
