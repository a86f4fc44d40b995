package store_test

import (
	"context"
	"strings"
	"testing"

	"stashd/internal/pgtest"
	"stashd/store"
)

// A primary that turns read-only under a running store (a demoted node,
// default_transaction_read_only set and reloaded) reports it on each
// connection; with target_session_attrs=read-write those connections are
// dropped as they are next taken, and a write goes to a new connection
// instead of failing with read_only_sql_transaction.
func TestReadOnlyConnectionsAreDropped(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	st := openOn(t, url+sep+"target_session_attrs=read-write")
	ctx := t.Context()
	if _, err := st.Pool().Exec(ctx, `CREATE TABLE probe (n int)`); err != nil {
		t.Fatal(err)
	}
	// Every idle connection turns read-only (as a reload would tell it).
	conns := make([]interface{ Release() }, 0, 4)
	for range 4 {
		c, err := st.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, `SET default_transaction_read_only = on`); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	if err := st.Commit(ctx, store.Statement{SQL: `INSERT INTO probe VALUES (1)`}); err != nil {
		t.Fatalf("group commit on a pool of read-only connections: %v", err)
	}
	if _, err := st.Pool().Exec(context.Background(), `INSERT INTO probe VALUES (2)`); err != nil {
		t.Fatalf("a write on a pool of read-only connections: %v", err)
	}
}
