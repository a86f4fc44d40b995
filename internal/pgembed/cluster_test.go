package pgembed

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/internal/proc"
)

// clusterDir returns a fresh directory for a cluster. It is not under
// t.TempDir: as root that is a 0700 root-owned directory, which the
// postgres user that runs the server cannot traverse.
func clusterDir(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "pgembed-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	return filepath.Join(base, "c")
}

func startCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func queryString(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestStartStopRestartKeepsData(t *testing.T) {
	t.Parallel()
	// A directory too long for a socket path: the socket must go elsewhere.
	dir := filepath.Join(clusterDir(t), strings.Repeat("long-directory-name-", 5))
	c := startCluster(t, Config{Dir: dir, Fast: true})
	if len(c.sockDir) > maxSocketDir || strings.HasPrefix(c.sockDir, dir) {
		t.Fatalf("socket directory %q: want a short one outside %q", c.sockDir, dir)
	}

	conn := connect(t, c.URL(""))
	if v := queryString(t, conn, "SELECT version()"); !strings.HasPrefix(v, "PostgreSQL ") {
		t.Fatalf("version() = %q", v)
	}
	if v := queryString(t, conn, "SHOW listen_addresses"); v != "" {
		t.Fatalf("listen_addresses = %q, want none (unix socket only)", v)
	}
	if v := queryString(t, conn, "SHOW fsync"); v != "off" {
		t.Fatalf("fsync = %q with Fast, want off", v)
	}
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before restart')"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx) // a fast shutdown would disconnect it anyway

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if _, err := os.Stat(c.sockDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary socket directory %s not removed: %v", c.sockDir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("postmaster.pid left after Stop: %v", err)
	}

	c2 := startCluster(t, Config{Dir: dir}) // durable settings on the same data
	conn2 := connect(t, c2.URL("postgres"))
	if v := queryString(t, conn2, "SELECT v FROM kept"); v != "before restart" {
		t.Fatalf("after restart kept.v = %q", v)
	}
	if v := queryString(t, conn2, "SHOW fsync"); v != "on" {
		t.Fatalf("fsync = %q without Fast, want on", v)
	}
	// JIT needs memory both writable and executable, which the shipped
	// unit's MemoryDenyWriteExecute=yes forbids.
	if v := queryString(t, conn2, "SHOW jit"); v != "off" {
		t.Fatalf("jit = %q, want off", v)
	}
	// Segments in the data directory go with it, even after a SIGKILL.
	if v := queryString(t, conn2, "SHOW dynamic_shared_memory_type"); v != "mmap" {
		t.Fatalf("dynamic_shared_memory_type = %q, want mmap", v)
	}
}

func TestStartAfterKilledServer(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	c := startCluster(t, Config{Dir: dir, Fast: true})
	// Leave a backend running, as a crashed daemon would.
	conn := connect(t, c.URL(""))
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	_ = conn.Close(context.Background())
	if _, err := os.Stat(filepath.Join(dir, "data", "postmaster.pid")); err != nil {
		t.Fatalf("a killed postmaster should leave postmaster.pid behind: %v", err)
	}
	if err := c.Stop(); err == nil {
		t.Fatal("Stop of a killed server: want an error saying it had exited")
	}

	c2 := startCluster(t, Config{Dir: dir, Fast: true})
	conn2 := connect(t, c2.URL(""))
	if v := queryString(t, conn2, "SELECT 'up'"); v != "up" {
		t.Fatalf("query after restart = %q", v)
	}
}

func TestStartRemovesPIDFileOfUnrelatedProcess(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	c := startCluster(t, Config{Dir: dir, Fast: true})
	pidFile := filepath.Join(dir, "data", "postmaster.pid")
	content, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}

	// The dead postmaster's pid now belongs to a live process of the same
	// user that is not PostgreSQL's parent: PostgreSQL alone would take it
	// for a running server and refuse to start.
	owner, err := serverUser()
	if err != nil {
		t.Fatal(err)
	}
	other := exec.Command("cat")
	other.SysProcAttr = &syscall.SysProcAttr{Credential: owner.credential()}
	stdin, err := other.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = other.Wait() })
	_, rest, _ := strings.Cut(string(content), "\n")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(other.Process.Pid)+"\n"+rest), 0o600); err != nil {
		t.Fatal(err)
	}
	// Owned like the data directory, as the server's own file would be.
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "data"), &st); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(pidFile, int(st.Uid), int(st.Gid)); err != nil {
		t.Fatal(err)
	}

	c2 := startCluster(t, Config{Dir: dir, Fast: true})
	if pid, _ := readPID(pidFile); pid != c2.cmd.Process.Pid {
		t.Fatalf("postmaster.pid holds %d, want the new server's %d", pid, c2.cmd.Process.Pid)
	}
}

func TestStartRefusesRunningCluster(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	c := startCluster(t, Config{Dir: dir, Fast: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c2, err := Start(ctx, Config{Dir: dir, Fast: true})
	if err == nil {
		_ = c2.Stop()
		t.Fatal("second Start on a running cluster succeeded")
	}
	if !strings.Contains(err.Error(), "already running") {
		t.Fatalf("error %q does not say the cluster is already running", err)
	}
	conn := connect(t, c.URL(""))
	if v := queryString(t, conn, "SELECT 'still up'"); v != "still up" {
		t.Fatalf("first cluster after refused start: %q", v)
	}
}

func TestStartReportsServerLog(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	c := startCluster(t, Config{Dir: dir, Fast: true})
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// The command line sets what stashd needs; an invalid value of any
	// other setting fails start-up with a line in the server log.
	conf := filepath.Join(dir, "data", "postgresql.conf")
	if err := os.WriteFile(conf, []byte("wal_level = 'bogus'\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c2, err := Start(ctx, Config{Dir: dir, Fast: true})
	if err == nil {
		_ = c2.Stop()
		t.Fatal("Start with a broken postgresql.conf succeeded")
	}
	if !strings.Contains(err.Error(), "wal_level") {
		t.Fatalf("error does not carry the server log: %v", err)
	}
}

func TestStartMissingBinaries(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	_, err := Start(context.Background(), Config{Dir: dir, BinDir: t.TempDir()})
	if !errors.Is(err, errNoBinaries) {
		t.Fatalf("Start with an empty BinDir: %v, want errNoBinaries", err)
	}
	if !strings.Contains(err.Error(), "install the postgresql package") {
		t.Fatalf("error %q does not tell the user what to install", err)
	}
}

func TestStartHonoursCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Start(ctx, Config{Dir: clusterDir(t), Fast: true})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestStartUnreachableDirAsRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	// t.TempDir is 0700 and root's: the postgres user cannot enter it.
	_, err := Start(context.Background(), Config{Dir: filepath.Join(t.TempDir(), "c")})
	if err == nil || !strings.Contains(err.Error(), "not reachable by user postgres") {
		t.Fatalf("Start under a root-only directory: %v, want a reachability error", err)
	}
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()
	fakeBin := func(t *testing.T, dir string, names ...string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("highest version wins numerically", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		fakeBin(t, filepath.Join(root, "9.6", "bin"), "initdb", "postgres")
		fakeBin(t, filepath.Join(root, "15", "bin"), "initdb", "postgres")
		fakeBin(t, filepath.Join(root, "16", "bin"), "postgres") // incomplete
		got, err := findBinDir("", root)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(root, "15", "bin"); got != want {
			t.Fatalf("findBinDir = %q, want %q", got, want)
		}
	})
	t.Run("PATH first, through symlinks", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		real := filepath.Join(root, "lib", "15", "bin")
		fakeBin(t, real, "initdb", "postgres")
		path := filepath.Join(root, "path")
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
		// Only postgres is linked into PATH: its real directory has both.
		if err := os.Symlink(filepath.Join(real, "postgres"), filepath.Join(path, "postgres")); err != nil {
			t.Fatal(err)
		}
		got, err := findBinDir(path, filepath.Join(root, "nothing"))
		if err != nil {
			t.Fatal(err)
		}
		if got != real {
			t.Fatalf("findBinDir = %q, want %q", got, real)
		}
	})
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		_, err := findBinDir(root, root)
		if !errors.Is(err, errNoBinaries) || !strings.Contains(err.Error(), "install the postgresql package") {
			t.Fatalf("findBinDir with nothing installed: %v", err)
		}
	})
}

// TestOwnerProcess is not a test: run by TestStartAfterOwnerKilled as a
// child process, it starts a cluster, says so and waits to be killed, as a
// stashd daemon on the embedded default does.
func TestOwnerProcess(t *testing.T) {
	dir := os.Getenv("PGEMBED_OWNER_DIR")
	if dir == "" {
		t.Skip("run as a child process by TestStartAfterOwnerKilled")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Dir: dir, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
}

// A stashd process killed by SIGKILL leaves its server shutting down: a
// restarted process must neither share that server (Running) nor give up
// because it still runs (Start), but wait for it and start its own.
func TestStartAfterOwnerKilled(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	child := exec.Command(os.Args[0], "-test.run=^TestOwnerProcess$", "-test.count=1")
	child.Env = append(os.Environ(), "PGEMBED_OWNER_DIR="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	if !strings.Contains(string(buf[:n]), "ready") {
		_ = child.Process.Kill()
		t.Fatalf("owner process: %q", buf[:n])
	}
	pid, ok := readPID(filepath.Join(dir, "data", "postmaster.pid"))
	if !ok {
		t.Fatal("no postmaster.pid while the owner runs")
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if url, ok := Running(ctx, dir); ok {
		t.Fatalf("Running shares %s, the server of a killed process", url)
	}
	c := startCluster(t, Config{Dir: dir, Fast: true})
	if c.PID() == pid || proc.Alive(pid) {
		t.Fatalf("the killed process's postmaster %d still runs beside the new one %d", pid, c.PID())
	}
	conn := connect(t, c.URL(""))
	if v := queryString(t, conn, "SELECT 'up'"); v != "up" {
		t.Fatalf("query on the new server = %q", v)
	}
	if url, ok := Running(ctx, dir); !ok || url != c.URL("") {
		t.Errorf("Running = %q, %v; want the new server, shared", url, ok)
	}
}
