package pgtest_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"stashd/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// TestGoleakOptions runs first and alone: the parallel tests below are
// still paused, so the only goroutine New leaves is the cluster's.
func TestGoleakOptions(t *testing.T) {
	pgtest.New(t)
	paused := goleak.IgnoreAnyFunction("testing.(*T).Parallel")
	if err := goleak.Find(append(pgtest.GoleakOptions(), paused)...); err != nil {
		t.Fatalf("goroutines left with GoleakOptions: %v", err)
	}
	if os.Getenv(pgtest.EnvURL) != "" {
		return // no private cluster, so nothing for the options to hide
	}
	if err := goleak.Find(paused); err == nil || !strings.Contains(err.Error(), "pgembed") {
		t.Fatalf("without GoleakOptions goleak should see the cluster's goroutine, got %v", err)
	}
}

func TestNewGivesEachTestItsOwnMigratedDatabase(t *testing.T) {
	t.Parallel()
	names := []string{"first", "second"}
	written := map[string]chan struct{}{}
	for _, n := range names {
		written[n] = make(chan struct{})
	}
	var mu sync.Mutex
	urls := map[string]string{}

	t.Run("group", func(t *testing.T) {
		for i, name := range names {
			other := names[1-i]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var once sync.Once
				signal := func() { once.Do(func() { close(written[name]) }) }
				defer signal() // a failing test must not leave the other waiting

				url := pgtest.New(t)
				mu.Lock()
				urls[name] = url
				mu.Unlock()
				conn := connect(t, url)
				ctx := context.Background()

				var tables int
				err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'
					AND tablename IN ('accounts', 'sources', 'packages', 'deliveries', 'dead_letters')`).Scan(&tables)
				if err != nil || tables != 5 {
					t.Fatalf("migrated tables present: %d, %v; want 5", tables, err)
				}
				var rows int
				if err := conn.QueryRow(ctx, "SELECT count(*) FROM accounts").Scan(&rows); err != nil || rows != 0 {
					t.Fatalf("accounts rows in a fresh database: %d, %v; want 0", rows, err)
				}
				if _, err := conn.Exec(ctx, "INSERT INTO accounts (name) VALUES ($1)", name); err != nil {
					t.Fatal(err)
				}
				signal()
				select {
				case <-written[other]:
				case <-time.After(time.Minute):
					t.Fatal("the other test never wrote its row")
				}
				var got []string
				if err := conn.QueryRow(ctx, "SELECT array_agg(name) FROM accounts").Scan(&got); err != nil {
					t.Fatal(err)
				}
				if len(got) != 1 || got[0] != name {
					t.Fatalf("accounts = %v, want only this test's row %q", got, name)
				}
			})
		}
	})

	if len(urls) != 2 || urls["first"] == urls["second"] {
		t.Fatalf("databases of the two tests: %v, want two different ones", urls)
	}
	// The subtests have ended, so their cleanup has dropped the databases.
	for name, url := range urls {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := pgx.Connect(ctx, url)
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			t.Fatalf("database of %s still exists after its test ended", name)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "3D000" {
			t.Fatalf("connect to dropped database of %s: %v, want invalid_catalog_name (3D000)", name, err)
		}
	}
}

func TestNewManyParallel(t *testing.T) {
	t.Parallel()
	for i := range 6 {
		t.Run("db", func(t *testing.T) {
			t.Parallel()
			conn := connect(t, pgtest.New(t))
			var db string
			if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&db); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(db, "_testnewmanyparallel_db") && !strings.Contains(db, "_testnewmanyparallel_db_") {
				t.Fatalf("database %q (run %d) does not name its test", db, i)
			}
		})
	}
}
