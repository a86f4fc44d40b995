package pgembed

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A synchronous standby copied with pg_basebackup streams every commit;
// when the primary is SIGKILLed and the standby promoted, a connection
// string naming both servers reaches the new primary, and every commit a
// client saw before the kill is there.
func TestStandbyFailover(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := clusterDir(t)
	primary := startCluster(t, Config{Dir: filepath.Join(base, "a"), Synchronous: true})
	standby := startCluster(t, Config{Dir: filepath.Join(base, "b"), StandbyOf: primary.URL(""), Synchronous: true})
	if err := primary.WaitStreaming(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if in, err := standby.InRecovery(ctx); err != nil || !in {
		t.Fatalf("standby in recovery: %v, %v; want true", in, err)
	}

	pool, err := pgxpool.New(ctx, URLs("", primary, standby))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE t (n int)`); err != nil {
		t.Fatal(err)
	}
	for n := range 50 {
		if _, err := pool.Exec(ctx, `INSERT INTO t VALUES ($1)`, n); err != nil {
			t.Fatalf("insert %d before the failover: %v", n, err)
		}
	}

	if err := syscall.Kill(primary.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-primary.Done()
	// Writes fail while no server accepts them.
	if _, err := pool.Exec(ctx, `INSERT INTO t VALUES (-1)`); err == nil {
		t.Fatal("a write with the primary dead and the standby not promoted succeeded")
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	// A synchronous primary waits for a standby at each commit: a new one
	// is copied from the promoted server, as an operator (or Patroni)
	// would.
	startCluster(t, Config{Dir: filepath.Join(base, "c"), StandbyOf: standby.URL(""), Synchronous: true})
	var resumed error
	for range 100 {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, resumed = pool.Exec(wctx, `INSERT INTO t VALUES (50)`)
		cancel()
		if resumed == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resumed != nil {
		t.Fatalf("writes did not resume on the promoted standby: %v", resumed)
	}
	var rows, recovery int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE pg_is_in_recovery()) FROM t WHERE n >= 0`).Scan(&rows, &recovery); err != nil {
		t.Fatal(err)
	}
	if rows != 51 || recovery != 0 {
		t.Fatalf("after the failover: %d rows (%d read on a standby), want 51 on the new primary", rows, recovery)
	}
}

// A restore puts the database back as the dump found it: rows written
// after the dump are gone.
func TestDumpAndRestore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := startCluster(t, Config{Dir: clusterDir(t), Fast: true})
	conn := connect(t, c.URL(""))
	if _, err := conn.Exec(ctx, `CREATE TABLE t (n int); INSERT INTO t VALUES (1), (2)`); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), "catalogue.dump")
	if err := Dump(ctx, "", c.URL(""), dump); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO t VALUES (3)`); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Restore(ctx, "", c.URL(""), dump); err != nil {
		t.Fatal(err)
	}
	if n := queryString(t, connect(t, c.URL("")), `SELECT string_agg(n::text, ',' ORDER BY n) FROM t`); n != "1,2" {
		t.Fatalf("after the restore: rows %s, want 1,2", n)
	}
}

// A restore under a client that keeps working may deadlock with it: the
// restore drops the referencing table's foreign key (holding that table)
// while the client reads the referenced one, then the client reads the
// referencing table. PostgreSQL fails the restore, which waited first;
// Restore runs it again once the client's transaction ends, and the
// database is the dump's.
//
// PostgreSQL looks for a deadlock once, deadlock_timeout after a session
// began to wait, and fails the session that looks while the cycle is
// closed. With the default second on both sides, a loaded machine could
// close the cycle only after the restore had looked, and the client
// would be failed. So the restore's sessions look after 5 s (its role's
// setting), and the client's after a minute: the restore is the one that
// finds the cycle, however late the client closes it.
func TestRestoreRunsAgainAfterADeadlock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := startCluster(t, Config{Dir: clusterDir(t), Fast: true})
	client := connect(t, c.URL(""))
	if _, err := client.Exec(ctx, `CREATE TABLE parent (id int PRIMARY KEY); CREATE TABLE child (id int, parent_id int REFERENCES parent (id));
		INSERT INTO parent VALUES (1); INSERT INTO child VALUES (1, 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Exec(ctx, `ALTER ROLE CURRENT_USER SET deadlock_timeout = '5s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Exec(ctx, `SET deadlock_timeout = '60s'`); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), "catalogue.dump")
	if err := Dump(ctx, "", c.URL(""), dump); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Exec(ctx, `INSERT INTO parent VALUES (2)`); err != nil {
		t.Fatal(err)
	}

	tx, err := client.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT count(*) FROM parent`); err != nil {
		t.Fatal(err)
	}
	restored := make(chan error, 1)
	go func() { restored <- Restore(ctx, "", c.URL(""), dump) }()
	// The restore holds child and waits for parent.
	watch := connect(t, c.URL(""))
	for deadline := time.Now().Add(30 * time.Second); ; {
		var waiting int
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restore never waited for the client's lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The client's read of child closes the cycle; the restore, waiting
	// first, is the one failed.
	if _, err := tx.Exec(ctx, `SELECT count(*) FROM child`); err != nil {
		t.Fatalf("the client's read: %v (PostgreSQL failed it, not the restore: the test proves nothing)", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-restored; err != nil {
		t.Fatalf("Restore after a deadlock: %v", err)
	}
	if n := queryString(t, connect(t, c.URL("")), `SELECT string_agg(id::text, ',' ORDER BY id) FROM parent`); n != "1" {
		t.Fatalf("after the restore: parent rows %s, want 1", n)
	}
}
