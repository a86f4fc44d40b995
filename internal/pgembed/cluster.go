package pgembed

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/internal/proc"
)

const (
	// Superuser is the role initdb creates; it connects without a password
	// (trust) over the private socket.
	Superuser = "stashd"

	// port only names the socket file (.s.PGSQL.5432): the server has no
	// TCP listener, and the socket directory is private to the cluster.
	port = 5432

	logName     = "postgres.log"
	logMaxBytes = 8 << 20 // rotated to postgres.log.1 at start beyond this

	// maxSocketDir bounds the socket directory's length: a unix socket path
	// must fit sun_path (108 bytes with its NUL), and the server also
	// creates "<dir>/.s.PGSQL.5432.lock" beside the socket.
	maxSocketDir = 107 - len("/.s.PGSQL.5432.lock")

	stopFastWait      = 30 * time.Second
	stopImmediateWait = 5 * time.Second
	staleWait         = 10 * time.Second
	pollEvery         = 25 * time.Millisecond
)

// Config configures Start.
type Config struct {
	// Dir is the cluster's directory: Start creates it 0700 (parents 0755),
	// and it holds the data directory (Dir/data), the server log
	// (Dir/postgres.log) and, when the path is short enough, the socket.
	// When running as root it is given to the postgres user, and every
	// directory above it must be traversable by that user. Required.
	Dir string
	// BinDir holds the server binaries (initdb, postgres). "" means
	// FindBinDir: PATH, then /usr/lib/postgresql/<highest version>/bin.
	BinDir string
	// Fast trades durability for speed, for tests only: fsync=off,
	// synchronous_commit=off and full_page_writes=off, a checkpoint at
	// least every 128 MB of WAL, and initdb skips its final sync. A crash
	// of the machine (not of the server) can then corrupt the cluster.
	// False means PostgreSQL's durable defaults.
	Fast bool
	// StandbyOf, when set, makes the cluster a streaming-replication
	// standby of the server at that connection string (a Cluster's URL):
	// a new data directory is copied from it with pg_basebackup, which
	// also writes the standby's primary_conninfo and standby.signal. An
	// existing data directory is started as it is. "" means a primary.
	StandbyOf string
	// Synchronous makes the server wait, at each commit, for a standby to
	// confirm that it has the commit's write-ahead log
	// (synchronous_standby_names = '*'): a promoted standby then holds
	// every commit a client saw. While no standby is connected, commits
	// wait. It matters only on a primary (and on a standby once promoted).
	Synchronous bool
	// StartTimeout bounds how long Start waits for the server to accept
	// connections. Zero means 60 s.
	StartTimeout time.Duration
	// Logger receives start and stop events. Nil discards them.
	Logger *slog.Logger
}

// Cluster is a running private PostgreSQL server started by Start. Its
// methods are safe for concurrent use.
type Cluster struct {
	dir        string // real path of Config.Dir
	dataDir    string
	sockDir    string
	ownSockDir bool // sockDir is a temporary directory that Stop removes
	logPath    string
	logStart   int64 // size of the log before this start: the tail starts here
	log        *slog.Logger
	cmd        *exec.Cmd
	binDir     string
	owner      *runAs

	exited  chan struct{} // closed once the postmaster has exited
	waitErr error         // the postmaster's exit status; read after exited

	stopOnce sync.Once
	stopErr  error
}

// Start initialises the cluster in cfg.Dir when it has no data directory
// yet, starts the server and returns once it accepts connections. It fails
// with the tail of the server log when the server exits or does not become
// ready within cfg.StartTimeout, and stops the server when ctx ends first.
//
// A postmaster.pid left by a killed server is removed. A server left
// running by a stashd process that died is shut down (fast) and waited
// for. A cluster running in cfg.Dir for a live process is an error: one
// directory, one server.
//
// The postmaster is a child of this process and gets SIGINT (fast
// shutdown) if this process dies without calling Stop, so a crashed daemon
// or test binary does not leave a server behind.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("start postgres: Config.Dir is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	binDir, err := lookBinDir(cfg.BinDir)
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	owner, err := serverUser()
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	dir, err := prepareDir(cfg.Dir, owner)
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	dataDir := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) && cfg.StandbyOf != "" {
		log.Info("copying a standby from its primary", "dir", dir)
		if err := basebackup(ctx, binDir, dir, dataDir, owner, cfg.StandbyOf); err != nil {
			return nil, fmt.Errorf("start postgres standby: %w", err)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		log.Info("initialising postgres cluster", "dir", dir)
		if err := initdb(ctx, binDir, dir, dataDir, owner, cfg.Fast); err != nil {
			return nil, fmt.Errorf("start postgres: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if err := clearStale(ctx, dir, dataDir, staleWait); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	sockDir, own, err := socketDir(dir, owner)
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c := &Cluster{
		dir:        dir,
		dataDir:    dataDir,
		sockDir:    sockDir,
		ownSockDir: own,
		logPath:    filepath.Join(dir, logName),
		log:        log,
		exited:     make(chan struct{}),
	}
	c.binDir, c.owner = binDir, owner
	if err := c.launch(binDir, owner, cfg.Fast, cfg.Synchronous); err != nil {
		c.removeSockDir()
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if err := c.waitReady(ctx, cmp.Or(cfg.StartTimeout, 60*time.Second)); err != nil {
		_ = c.Stop() // the start error is the one worth reporting
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	// Other stashd commands (status, deadletters) find the running server
	// through this file rather than starting a second one; the owner file
	// tells a server whose stashd process died from one still in use.
	if err := os.WriteFile(filepath.Join(dir, ownerName), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, urlName), []byte(c.URL("")), 0o600); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	log.Info("postgres cluster started", "dir", dir, "socket_dir", sockDir, "pid", c.cmd.Process.Pid)
	return c, nil
}

// urlName is the file in the cluster directory that holds the running
// server's connection string; ownerName the pid of the process that
// started it.
const (
	urlName   = "url"
	ownerName = "owner"
)

// owner returns the pid of the process that started the cluster in dir.
func owner(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, ownerName))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// Running returns the connection string (for the database initdb creates)
// of a server that a live stashd process started in dir and that still
// accepts connections; ok is false when none does. A server whose stashd
// process died (SIGKILL, OOM) is shutting down (see Start) and is not
// shared.
func Running(ctx context.Context, dir string) (url string, ok bool) {
	if pid, ok := owner(dir); !ok || !proc.Alive(pid) {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(dir, urlName))
	if err != nil {
		return "", false
	}
	conn, err := pgx.Connect(ctx, string(b))
	if err != nil {
		return "", false
	}
	_ = conn.Close(ctx)
	return string(b), true
}

// URL returns a pgx connection string for database over the cluster's unix
// socket, as the superuser. An empty database means "postgres", the
// database initdb creates.
func (c *Cluster) URL(database string) string {
	u := url.URL{
		Scheme: "postgres",
		User:   url.User(Superuser),
		Path:   "/" + cmp.Or(database, "postgres"),
		RawQuery: url.Values{
			"host":    {c.sockDir},
			"port":    {strconv.Itoa(port)},
			"sslmode": {"disable"},
		}.Encode(),
	}
	return u.String()
}

// PID is the postmaster's process id.
func (c *Cluster) PID() int { return c.cmd.Process.Pid }

// Done is closed when the server has exited, whether Stop asked it to or it
// died; a daemon on the embedded default watches it to stop too.
func (c *Cluster) Done() <-chan struct{} { return c.exited }

// Stop shuts the server down with a fast shutdown (SIGINT, what pg_ctl
// stop -m fast sends: open transactions roll back, clients are
// disconnected, a checkpoint is written) and waits for it to exit,
// escalating to an immediate shutdown and then SIGKILL if it hangs. It
// removes a temporary socket directory. Stop is idempotent: later calls
// return the first call's result. It reports an error when the server had
// already died or had to be killed.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	defer c.removeSockDir()
	defer os.Remove(filepath.Join(c.dir, urlName))
	defer os.Remove(filepath.Join(c.dir, ownerName))
	select {
	case <-c.exited:
		if c.waitErr != nil {
			return fmt.Errorf("stop postgres: it had already exited: %w", c.waitErr)
		}
		return nil
	default:
	}
	steps := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{
		{syscall.SIGINT, stopFastWait},       // fast shutdown
		{syscall.SIGQUIT, stopImmediateWait}, // immediate shutdown: no checkpoint
		{syscall.SIGKILL, stopImmediateWait},
	}
	for i, s := range steps {
		if err := c.cmd.Process.Signal(s.sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("stop postgres: signal %v: %w", s.sig, err)
		}
		timer := time.NewTimer(s.wait)
		select {
		case <-c.exited:
			timer.Stop()
			if i > 0 {
				return fmt.Errorf("stop postgres: fast shutdown took more than %v; sent %v", stopFastWait, s.sig)
			}
			c.log.Info("postgres cluster stopped", "dir", c.dir)
			// A fast shutdown exits 0; anything else is worth reporting.
			if c.waitErr != nil {
				return fmt.Errorf("stop postgres: %w", c.waitErr)
			}
			return nil
		case <-timer.C:
		}
	}
	return fmt.Errorf("stop postgres: pid %d did not exit after SIGKILL", c.cmd.Process.Pid)
}

func (c *Cluster) removeSockDir() {
	if c.ownSockDir {
		_ = os.RemoveAll(c.sockDir) // best effort: a leftover empty dir in /tmp is harmless
	}
}

// launch starts the postmaster with every setting on its command line, so
// that the same data directory can be started fast or durable and the
// socket directory may differ from one start to the next.
func (c *Cluster) launch(binDir string, owner *runAs, fast, synchronous bool) error {
	logf, err := c.openLog()
	if err != nil {
		return err
	}
	// The child keeps its own descriptor; ours is only needed until then.
	defer logf.Close()
	args := []string{
		"-D", c.dataDir,
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories=" + quoteDirectory(c.sockDir),
		"-c", "unix_socket_permissions=0700",
		"-c", "port=" + strconv.Itoa(port),
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
		"-c", "logging_collector=off",
		// JIT compiles queries into memory it then executes, which
		// MemoryDenyWriteExecute= (deploy/stashd.service) forbids: a JIT
		// query would crash the server under the shipped unit. stashd's
		// queries are small; they gain nothing from it.
		"-c", "jit=off",
		// Dynamic shared memory in files of the data directory, not
		// /dev/shm: a server killed outright (SIGKILL, an OOM kill)
		// leaves its segments behind, and they go with the directory.
		"-c", "dynamic_shared_memory_type=mmap",
	}
	if synchronous {
		args = append(args, "-c", "synchronous_standby_names=*")
	}
	if fast {
		args = append(args,
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			// A test binary creates a database (8 MB of WAL) for
			// almost every test; a checkpoint every 128 MB keeps the
			// WAL small on a memory file system (see pgtest).
			"-c", "max_wal_size=128MB",
			"-c", "min_wal_size=32MB",
		)
	}
	cmd := exec.Command(filepath.Join(binDir, "postgres"), args...)
	cmd.Dir = c.dir
	cmd.Env = serverEnv()
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: owner.credential(),
		// Its own process group: a Ctrl-C on the terminal must reach
		// stashd, which then stops the server in order, not the server.
		Setpgid: true,
		// Fast shutdown when this process dies without calling Stop.
		Pdeathsig: syscall.SIGINT,
	}
	c.cmd = cmd
	started := make(chan error, 1)
	go c.supervise(started)
	if err := <-started; err != nil {
		return fmt.Errorf("run %s: %w", cmd.Path, err)
	}
	return nil
}

// supervise starts the postmaster and waits for it. The parent-death
// signal fires when the thread that forked the child exits, not the
// process, so this goroutine holds its thread for the server's lifetime.
func (c *Cluster) supervise(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.cmd.Start(); err != nil {
		started <- err
		return
	}
	started <- nil
	c.waitErr = c.cmd.Wait()
	close(c.exited)
}

// waitReady polls until the server accepts a connection.
func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		err := c.ping(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for postgres to accept connections: %w", ctx.Err())
		case <-c.exited:
			return fmt.Errorf("postgres exited during start-up (%v); server log %s:\n%s", c.waitErr, c.logPath, c.logTail())
		case <-deadline.C:
			return fmt.Errorf("postgres did not accept connections within %v (last error: %v); server log %s:\n%s", timeout, err, c.logPath, c.logTail())
		case <-tick.C:
		}
	}
}

func (c *Cluster) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL(""))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// openLog opens the server log for appending, rotating it first when it
// has grown large, and remembers where this start's lines begin.
func (c *Cluster) openLog() (*os.File, error) {
	if fi, err := os.Stat(c.logPath); err == nil && fi.Size() > logMaxBytes {
		_ = os.Rename(c.logPath, c.logPath+".1") // best effort: appending to a big log still works
	}
	f, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open server log: %w", err)
	}
	if fi, err := f.Stat(); err == nil {
		c.logStart = fi.Size()
	}
	return f, nil
}

// logTail returns the last lines the server wrote since this start.
func (c *Cluster) logTail() string {
	const maxLines, maxBytes = 20, 8 << 10 // enough to show why it failed
	f, err := os.Open(c.logPath)
	if err != nil {
		return "(cannot read: " + err.Error() + ")"
	}
	defer f.Close()
	from := c.logStart
	if fi, err := f.Stat(); err == nil && fi.Size()-from > maxBytes {
		from = fi.Size() - maxBytes
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return "(cannot read: " + err.Error() + ")"
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxBytes))
	return lastLines(string(b), maxLines)
}

// prepareDir creates the cluster directory 0700 (and its parents 0755, so
// that the server user can traverse them), gives it to the server user and
// returns its real path: the server's working directory is compared to it.
func prepareDir(dir string, owner *runAs) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(abs), err)
	}
	if err := os.Mkdir(abs, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create %s: %w", abs, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", abs, err)
	}
	// With trust authentication the directory's mode is the access
	// control: the socket may live in it.
	if err := os.Chmod(real, 0o700); err != nil {
		return "", fmt.Errorf("restrict %s: %w", real, err)
	}
	if err := owner.chown(real); err != nil {
		return "", err
	}
	if err := owner.checkReachable(real); err != nil {
		return "", err
	}
	return real, nil
}

// socketDir returns where the server puts its socket: dir itself when the
// path fits a unix socket address, otherwise a new private directory under
// the temporary directory (own reports that Stop must remove it).
func socketDir(dir string, owner *runAs) (path string, own bool, err error) {
	if len(dir) <= maxSocketDir && !strings.ContainsAny(dir, `",`) {
		// No postmaster of this cluster is alive (clearStale checked), so
		// socket files left here by a killed one are stale.
		for _, name := range []string{".s.PGSQL.5432", ".s.PGSQL.5432.lock"} {
			_ = os.Remove(filepath.Join(dir, name)) // absent is the usual case
		}
		return dir, false, nil
	}
	for _, base := range []string{os.TempDir(), "/tmp"} {
		if len(base) > maxSocketDir-len("/stashd-pg-1234567890") || owner.checkReachable(filepath.Join(base, "x")) != nil {
			continue
		}
		tmp, err := os.MkdirTemp(base, "stashd-pg-")
		if err != nil {
			return "", false, fmt.Errorf("create socket directory: %w", err)
		}
		if err := owner.chown(tmp); err != nil {
			_ = os.Remove(tmp)
			return "", false, err
		}
		return tmp, true, nil
	}
	return "", false, fmt.Errorf("cluster directory %s is too long for a unix socket path and no short temporary directory is usable", dir)
}

// quoteDirectory quotes a path for unix_socket_directories, a
// comma-separated list whose items may be double-quoted.
func quoteDirectory(dir string) string {
	return `"` + strings.ReplaceAll(dir, `"`, `""`) + `"`
}

// serverEnv is the environment of initdb and the server: ours without the
// PG* variables (PGPORT, PGDATA … would override the command line's
// choices) and with the C locale, so messages are English and the cluster
// does not depend on the machine's locales.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// initdb creates the data directory. It initialises a sibling directory and
// renames it into place, so an interrupted initdb never leaves a data
// directory without PG_VERSION that would need a human to clean up.
func initdb(ctx context.Context, binDir, dir, dataDir string, owner *runAs, fast bool) error {
	tmp := dataDir + ".init"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove interrupted initdb %s: %w", tmp, err)
	}
	args := []string{
		"-D", tmp,
		"-U", Superuser,
		"--auth=trust",
		"--encoding=UTF8",
		// Byte order for sorting, Unicode for case: lower(), ILIKE and
		// pg_trgm fold and classify by LC_CTYPE, and with C they leave
		// "Отчёт" unmatched by "ОТЧЁТ".
		"--locale=C",
		"--lc-ctype=C.UTF-8",
	}
	if fast {
		args = append(args, "--no-sync")
	}
	return buildDataDir(ctx, filepath.Join(binDir, "initdb"), args, dir, tmp, dataDir, owner)
}

// buildDataDir runs a program that writes a new data directory into tmp
// (initdb, pg_basebackup) as the server user in dir, and renames tmp to
// dataDir once it succeeded; a failure removes tmp and quotes the end of
// the program's output.
func buildDataDir(ctx context.Context, program string, args []string, dir, tmp, dataDir string, owner *runAs) error {
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Dir = dir
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: owner.credential()}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("%s: %w; output:\n%s", filepath.Base(program), err, lastLines(out.String(), 20))
	}
	if err := os.Rename(tmp, dataDir); err != nil {
		return fmt.Errorf("move the new data directory into place: %w", err)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Exists reports whether dir holds an initialised cluster (whether or not
// a server runs it).
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION"))
	return err == nil
}
