package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// A Store on its own pool reads while every connection of the main pool is
// busy, and the server cancels its statements after its timeout; the main
// pool keeps no such limit.
func TestWithOwnPool(t *testing.T) {
	t.Parallel()
	st := open(t)
	own, err := st.WithOwnPool(t.Context(), 2, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n := st.Pool().Config().MaxConns
	for range n {
		go func() {
			defer func() { done <- struct{}{} }()
			_, _ = st.Pool().Exec(ctx, `SELECT pg_sleep(60)`)
		}()
	}
	defer func() {
		cancel()
		for range n {
			<-done
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); st.Pool().Stat().AcquiredConns() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the main pool's connections were not all taken")
		}
	}
	qctx, qcancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer qcancel()
	if _, err := own.Status(qctx); err != nil {
		t.Fatalf("status on its own pool with the main pool exhausted: %v", err)
	}
	_, err = own.Pool().Exec(qctx, `SELECT pg_sleep(2)`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" { // query_canceled
		t.Fatalf("a 2 s statement on a pool with a 300 ms timeout: %v, want it cancelled by the server", err)
	}
	if v := st.Pool().Config().ConnConfig.RuntimeParams["statement_timeout"]; v != "" {
		t.Errorf("the main pool took the statement timeout %q", v)
	}
}
