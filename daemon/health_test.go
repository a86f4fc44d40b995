package daemon_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/store"
	"stashd/tg"
)

// holdPool keeps every connection of st's main pool busy in pg_sleep until
// the test ends, and returns once all of them are taken.
func holdPool(t *testing.T, st *store.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	n := st.Pool().Config().MaxConns
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = st.Pool().Exec(ctx, `SELECT pg_sleep(60)`)
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.Pool().Stat().AcquiredConns() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d connections taken", st.Pool().Stat().AcquiredConns(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Health (and so /readyz) answers within its deadline while every
// connection of the main pool is busy: it asks the database through a
// path ingest load cannot take.
func TestHealthAnswersWhileMainPoolIsExhausted(t *testing.T) {
	t.Parallel()
	st := openStore(t, 2)
	d := daemon.New(daemon.Config{}, st, func(context.Context, string) (tg.Client, error) { return nil, nil })
	holdPool(t, st)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := d.Health(ctx); err != nil {
		t.Fatalf("Health with the main pool exhausted: %v after %s", err, time.Since(start))
	}
	if took := time.Since(start); took > store.PingTimeout {
		t.Fatalf("Health took %s, more than its deadline %s", took, store.PingTimeout)
	}
}
