package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/store"
)

// renewalCounter counts the statements that renew held locks.
type renewalCounter struct {
	batchTracer
	n atomic.Int64
}

func (c *renewalCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if d.SQL == store.RenewLocksSQL {
		c.n.Add(1)
	}
	return ctx
}

// The locks a store holds are renewed together, one statement a round for
// all of them, however many and however apart they were taken: a
// backlog's messages in flight each hold one while they wait for a
// download slot. A lock whose row went is lost at the next round, the
// others kept.
func TestHeldLocksAreRenewedTogether(t *testing.T) {
	t.Parallel()
	// Long enough that a loaded machine (make test runs packages side by
	// side, under -race) renews within it.
	const ttl = 1500 * time.Millisecond
	const n = 40
	tr := &renewalCounter{}
	st := openConfig(t, store.Config{LockTTL: ttl, Tracer: tr})
	ctx := t.Context()
	var locks []*store.Lock
	start := time.Now()
	for i := range n {
		l, err := st.Lock(ctx, fmt.Sprintf("u:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
		time.Sleep(ttl / 3 / n) // taken apart, over a third of the TTL
	}
	defer func() {
		for _, l := range locks {
			l.Unlock()
		}
	}()
	time.Sleep(2*ttl - time.Since(start)) // two TTLs: past the rows' first expiry
	elapsed := time.Since(start)
	for i, l := range locks {
		select {
		case <-l.Lost():
			t.Fatalf("lock %d lost while held", i)
		default:
		}
	}
	var live int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM package_locks WHERE until > now()`).Scan(&live); err != nil {
		t.Fatal(err)
	}
	if live != n {
		t.Fatalf("%d of the %d lock rows live after two TTLs; want all, renewed", live, n)
	}
	// A round at most every sixth of the TTL, and one more at the start:
	// one statement a lock would be 40 each third of the TTL.
	rounds := tr.n.Load()
	if most := int64(elapsed/(ttl/6)) + 1; rounds < 1 || rounds > most {
		t.Fatalf("%d renewal statements in %s for %d locks; want 1 to %d, one a round", rounds, elapsed, n, most)
	}

	if _, err := st.Pool().Exec(ctx, `DELETE FROM package_locks WHERE name = 'u:7'`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-locks[7].Lost():
	case <-time.After(ttl):
		t.Fatal("the lock whose row went is still held after a TTL")
	}
	for i, l := range locks {
		select {
		case <-l.Lost():
			if i != 7 {
				t.Errorf("lock %d lost with lock 7's row", i)
			}
		default:
		}
	}
}
