package pgembed

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5"
)

// basebackup copies a primary's data directory into dataDir as a standby
// (pg_basebackup, streaming the write-ahead log it needs, and -R for the
// standby's primary_conninfo and standby.signal). Like initdb it writes a
// sibling directory and renames it into place, so an interrupted copy
// never leaves a data directory that looks whole.
func basebackup(ctx context.Context, binDir, dir, dataDir string, owner *runAs, primary string) error {
	tmp := dataDir + ".copy"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove interrupted copy %s: %w", tmp, err)
	}
	return buildDataDir(ctx, tool(binDir, "pg_basebackup"),
		[]string{"-D", tmp, "-d", primary, "-X", "stream", "-R", "-c", "fast", "--no-sync"}, dir, tmp, dataDir, owner)
}

// Promote turns a standby into a primary (pg_ctl promote) and returns once
// it accepts writes. A primary is left as it is.
func (c *Cluster) Promote(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, tool(c.binDir, "pg_ctl"), "promote", "-D", c.dataDir, "-w", "-t", "60")
	cmd.Dir = c.dir
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.owner.credential()}
	out, err := cmd.CombinedOutput()
	if err != nil && !bytes.Contains(out, []byte("not in standby mode")) {
		return fmt.Errorf("promote %s: %w: %s", c.dir, err, bytes.TrimSpace(out))
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		standby, err := c.InRecovery(ctx)
		if err == nil && !standby {
			c.log.Info("postgres standby promoted", "dir", c.dir)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("promote %s: still a standby after 60s (%v)", c.dir, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// InRecovery reports whether the server is a standby (pg_is_in_recovery).
func (c *Cluster) InRecovery(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL(""))
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	var standby bool
	err = conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&standby)
	return standby, err
}

// WaitStreaming waits until a standby streams from this server, as
// pg_stat_replication shows it, for at most timeout.
func (c *Cluster) WaitStreaming(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var n int
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(qctx, c.URL(""))
		if err == nil {
			err = conn.QueryRow(qctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&n)
			conn.Close(qctx)
		}
		cancel()
		if err == nil && n > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no standby streams from %s after %v (%v)", c.dir, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery * 4):
		}
	}
}

// SocketDir is the directory holding the server's unix socket: the host
// of a connection string that names several servers.
func (c *Cluster) SocketDir() string { return c.sockDir }

// URLs returns one connection string naming every cluster given, in
// order, for database, that connects to whichever of them accepts writes
// (target_session_attrs=read-write): after a standby is promoted, new
// connections find it.
func URLs(database string, clusters ...*Cluster) string {
	hosts := make([]string, len(clusters))
	ports := make([]string, len(clusters))
	for i, c := range clusters {
		hosts[i], ports[i] = c.sockDir, strconv.Itoa(port)
	}
	return MultiHostURL(database, hosts, ports)
}

// MultiHostURL is the connection string for database on the unix socket
// directories hosts (with their ports) that connects to the one that
// accepts writes.
func MultiHostURL(database string, hosts, ports []string) string {
	u := url.URL{
		Scheme: "postgres",
		User:   url.User(Superuser),
		Path:   "/" + cmp.Or(database, "postgres"),
		RawQuery: url.Values{
			"host":                 {strings.Join(hosts, ",")},
			"port":                 {strings.Join(ports, ",")},
			"sslmode":              {"disable"},
			"target_session_attrs": {"read-write"},
		}.Encode(),
	}
	return u.String()
}

// Dir is the cluster's directory (the real path of Config.Dir).
func (c *Cluster) Dir() string { return c.dir }

// Walsenders returns the process ids of the server's WAL senders (one per
// standby streaming from it).
func (c *Cluster) Walsenders(ctx context.Context) ([]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL(""))
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_replication`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

// Crash SIGKILLs the postmaster and every process of its server at once, as
// a machine that loses power would stop them, and waits for the postmaster.
func (c *Cluster) Crash() error {
	// The postmaster leads its own process group (Setpgid): the backends
	// and auxiliary processes it forked are in it.
	if err := syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("crash %s: %w", c.dir, err)
	}
	<-c.exited
	return nil
}

// Dump writes database url to path in pg_dump's custom format, using the
// server binaries' pg_dump (binDir "" means FindBinDir).
func Dump(ctx context.Context, binDir, url, path string) error {
	bin, err := lookBinDir(binDir)
	if err != nil {
		return fmt.Errorf("pg_dump: %w", err)
	}
	out, err := exec.CommandContext(ctx, tool(bin, "pg_dump"), "--format=custom", "--file="+path, "--dbname="+url).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_dump: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Restore replaces the contents of database url with the dump at path
// (pg_restore --clean --if-exists), as an operator restoring last night's
// backup over a catalogue would. It runs as one transaction, which drops
// and recreates the tables' constraints: under clients that keep working
// (a running daemon) it may close a cycle of lock waits with one of them,
// and PostgreSQL may break the deadlock by failing the restore. Nothing of
// it then holds, and it is run again, up to restoreAttempts times.
func Restore(ctx context.Context, binDir, url, path string) error {
	bin, err := lookBinDir(binDir)
	if err != nil {
		return fmt.Errorf("pg_restore: %w", err)
	}
	restore := func() error {
		out, err := exec.CommandContext(ctx, tool(bin, "pg_restore"), "--clean", "--if-exists", "--single-transaction",
			"--exit-on-error", "--dbname="+url, path).CombinedOutput()
		if err == nil {
			return nil
		}
		err = fmt.Errorf("pg_restore: %w: %s", err, bytes.TrimSpace(out))
		if !bytes.Contains(out, []byte("deadlock detected")) {
			return backoff.Permanent(err)
		}
		return err
	}
	again := backoff.WithMaxRetries(backoff.NewConstantBackOff(100*time.Millisecond), restoreAttempts-1)
	return backoff.Retry(restore, backoff.WithContext(again, ctx))
}

// restoreAttempts bounds how many times Restore runs pg_restore when
// PostgreSQL breaks a deadlock by failing it.
const restoreAttempts = 5
