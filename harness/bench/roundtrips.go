package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"stashd/internal/pgtrips"
)

// roundTrips counts what a store's connections send to PostgreSQL (see
// package pgtrips: each statement, batch and COPY is a round trip, and
// the count is a floor), by what was sent (a statement's first words, a
// batch by its first statement's, a COPY by its table): the figure is
// their sum, and the table says where they go.
type roundTrips struct {
	mu    sync.Mutex
	bySQL map[string]int64
}

func (c *roundTrips) add(what string) {
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

// perPackage returns the round trips sent since before (a snapshot) over
// n packages, the bench's own polls of the catalogue left out, and the
// table of them by statement (tripTable).
func (c *roundTrips) perPackage(before map[string]int64, n int) (float64, string) {
	by := c.snapshot()
	for _, q := range []string{countPackages, countSent} {
		by[statementName(q)] = before[statementName(q)]
	}
	var sent int64
	for k, v := range by {
		sent += v - before[k]
	}
	return float64(sent) / float64(n), tripTable(before, by, float64(n), 0.01)
}

// tripTable returns the counts by statement between two snapshots, divided by
// per, most frequent first, the ones below least per left out.
func tripTable(before, after map[string]int64, per float64, least float64) string {
	type row struct {
		what string
		n    float64
	}
	var rows []row
	for k, v := range after {
		if d := float64(v-before[k]) / per; d >= least {
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

// statementName is the first 90 bytes of a statement with its runs of
// white space made one space, enough to tell it from the others. It reads
// no further than those: it runs for every statement the pipeline sends,
// some of them kilobytes long, and its cost is the bench's, not stashd's.
func statementName(sql string) string {
	const most = 90
	var b strings.Builder
	b.Grow(most)
	space := false
	for i := 0; i < len(sql) && b.Len() < most; i++ {
		switch c := sql[i]; c {
		case ' ', '\t', '\n', '\r', '\v', '\f':
			space = b.Len() > 0
		default:
			if space {
				b.WriteByte(' ')
				space = false
				if b.Len() == most {
					break
				}
			}
			b.WriteByte(c)
		}
	}
	return b.String()
}

// tracer is the store tracer that counts into c.
func (c *roundTrips) tracer() pgtrips.Tracer {
	return pgtrips.Tracer{Sent: func(what string) { c.add(statementName(what)) }}
}
