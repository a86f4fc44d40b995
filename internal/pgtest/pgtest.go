package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"stashd/internal/memfs"
	"stashd/internal/pgembed"
	"stashd/store"
)

// EnvURL names the environment variable that points the tests at an
// existing PostgreSQL server instead of a private cluster. Unset or empty
// means the private cluster.
const EnvURL = "STASHD_TEST_DATABASE_URL"

const (
	dirPrefix = "stashd-pgtest-"
	ownerFile = "owner.pid" // pid of the test binary that owns a cluster dir
	maxIdent  = 63          // PostgreSQL's identifier limit (NAMEDATALEN-1)
	opTimeout = 2 * time.Minute
)

// current is the harness of this test binary, set by Main for New. It is
// the package's one mutable global because TestMain and the tests share no
// other channel.
var current atomic.Pointer[harness]

// Main runs the tests of a package that uses New; call it from TestMain as
// os.Exit(pgtest.Main(m)). It prepares nothing until the first New, so a
// run that selects no database test costs nothing. It then uses the server
// named by STASHD_TEST_DATABASE_URL, or else starts one private cluster for
// the whole binary and stops it and removes its files after the tests.
//
// If the binary dies instead (a panic in a test, a timeout, a signal), the
// kernel sends the cluster's server a fast-shutdown signal, and the next
// binary that starts a cluster removes the leftover directory.
func Main(m *testing.M) (code int) {
	h, err := newHarness(os.Getenv(EnvURL))
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return 1
	}
	current.Store(h)
	defer func() {
		current.Store(nil)
		if err := h.close(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}()
	return m.Run()
}

// New returns the connection string of a new database private to t,
// migrated to the current schema and otherwise empty. The database is
// dropped when t's cleanup runs, even if connections to it are still open.
// It fails t when the server cannot be started or reached, and when the
// binary's TestMain does not call Main.
func New(t testing.TB) string {
	t.Helper()
	return current.Load().newDatabase(t)
}

// GoleakOptions returns the goleak options that ignore the goroutine
// which supervises the private cluster's server for the whole test binary;
// tests that check for leaked goroutines pass them to goleak.VerifyNone.
func GoleakOptions() []goleak.Option {
	return []goleak.Option{goleak.IgnoreAnyFunction("stashd/internal/pgembed.(*Cluster).supervise")}
}

// harness is one test binary's server, template database and database
// names.
type harness struct {
	serverURL string // EnvURL's value; "" means the private cluster
	tmpDir    string // where the private cluster's directory goes
	suffix    string // random, in every database name: binaries sharing a server never collide
	seq       atomic.Uint64

	// mu guards the fields below. It also serialises CREATE DATABASE: it
	// fails while another session is connected to the template.
	mu       sync.Mutex
	started  bool
	startErr error
	dir      string // the private cluster's directory
	cluster  *pgembed.Cluster
	adminURL string
	admin    *pgx.Conn // connected to the server's maintenance database
	template string    // set once the template database exists
	// fileCopy makes CREATE DATABASE copy the template's files (PostgreSQL
	// 15's STRATEGY FILE_COPY) rather than write them through the WAL: on
	// the private cluster, which runs without fsync, that costs the server
	// about a fifth of the CPU (a hundred milliseconds a database on a
	// slow machine). A shared server keeps its default: there the copy's
	// two checkpoints would be durable ones.
	fileCopy bool
}

func newHarness(serverURL string) (*harness, error) {
	if serverURL != "" {
		if _, err := pgx.ParseConfig(serverURL); err != nil {
			return nil, fmt.Errorf("parse %s: %w", EnvURL, err)
		}
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("make database name suffix: %w", err)
	}
	return &harness{serverURL: serverURL, tmpDir: clusterParent(), suffix: hex.EncodeToString(b)}, nil
}

func (h *harness) newDatabase(t testing.TB) string {
	t.Helper()
	if h == nil {
		t.Fatal("pgtest.New: this test binary's TestMain does not call pgtest.Main; add\n\tfunc TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }")
		return ""
	}
	name := h.dbName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := h.create(ctx, name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := h.drop(ctx, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	u, err := h.url(name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

func (h *harness) create(ctx context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.ensure(ctx); err != nil {
		return err
	}
	sql := "CREATE DATABASE " + ident(name) + " TEMPLATE " + ident(h.template)
	if h.fileCopy {
		sql += " STRATEGY FILE_COPY"
	}
	if _, err := h.admin.Exec(ctx, sql); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

func (h *harness) drop(ctx context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.reconnect(ctx); err != nil {
		return err
	}
	// FORCE: a test may leave connections open, and they must not keep
	// its database alive.
	if _, err := h.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// ensure starts the server and creates the template database, once; a
// failure is remembered so that every test reports it without retrying.
func (h *harness) ensure(ctx context.Context) error {
	if !h.started {
		h.started = true
		h.startErr = h.start(ctx)
	}
	if h.startErr != nil {
		return h.startErr
	}
	return h.reconnect(ctx)
}

func (h *harness) start(ctx context.Context) error {
	h.adminURL = h.serverURL
	if h.serverURL == "" {
		sweep(h.tmpDir)
		if tmp := os.TempDir(); tmp != h.tmpDir {
			sweep(tmp) // left by a binary that found no memory file system
		}
		dir, err := os.MkdirTemp(h.tmpDir, dirPrefix)
		if err != nil {
			return fmt.Errorf("create cluster directory: %w", err)
		}
		h.dir = dir
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return fmt.Errorf("mark cluster directory: %w", err)
		}
		c, err := pgembed.Start(ctx, pgembed.Config{Dir: dir, Fast: true})
		if err != nil {
			return fmt.Errorf("start private cluster (set %s to use a running server): %w", EnvURL, err)
		}
		h.cluster = c
		h.adminURL = c.URL("postgres")
	}
	if err := h.reconnect(ctx); err != nil {
		return err
	}
	h.fileCopy = h.cluster != nil && majorVersion(h.admin.PgConn().ParameterStatus("server_version")) >= 15
	template := "t_" + h.suffix + "_template"
	if _, err := h.admin.Exec(ctx, "CREATE DATABASE "+ident(template)); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	h.template = template
	tplURL, err := h.url(template)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, tplURL)
	if err != nil {
		return fmt.Errorf("connect to template database: %w", err)
	}
	migErr := store.Migrate(ctx, conn)
	// Closed before any CREATE DATABASE ... TEMPLATE, which fails while a
	// session is connected to the template (it waits a few seconds for a
	// closing one to go).
	if err := conn.Close(ctx); err != nil && migErr == nil {
		return fmt.Errorf("close template connection: %w", err)
	}
	if migErr != nil {
		return fmt.Errorf("migrate template database: %w", migErr)
	}
	return nil
}

// majorVersion is the major version in a server_version such as
// "15.8 (Debian 15.8-0+deb12u1)" or "17beta1", 0 when it names none.
func majorVersion(v string) int {
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(v[:end])
	if err != nil {
		return 0
	}
	return n
}

// reconnect opens the admin connection when it is not open: a test may
// have terminated it with the rest of a server's sessions.
func (h *harness) reconnect(ctx context.Context) error {
	if h.admin != nil && !h.admin.IsClosed() {
		return nil
	}
	conn, err := pgx.Connect(ctx, h.adminURL)
	if err != nil {
		return fmt.Errorf("connect to test server: %w", err)
	}
	h.admin = conn
	return nil
}

// close drops what the harness created on a shared server, or stops and
// removes the private cluster.
func (h *harness) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var errs []error
	if h.admin != nil {
		// The private cluster goes as a whole; a shared server keeps only
		// what is not ours.
		if h.cluster == nil && h.template != "" {
			if _, err := h.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(h.template)+" WITH (FORCE)"); err != nil {
				errs = append(errs, fmt.Errorf("drop template database: %w", err))
			}
		}
		_ = h.admin.Close(ctx) // the server is going or staying; nothing to report either way
		h.admin = nil
	}
	if h.cluster != nil {
		if err := h.cluster.Stop(); err != nil {
			errs = append(errs, err)
		}
		h.cluster = nil
	}
	if h.dir != "" {
		if err := os.RemoveAll(h.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove cluster directory: %w", err))
		}
		h.dir = ""
	}
	return errors.Join(errs...)
}

func (h *harness) url(database string) (string, error) {
	if h.cluster != nil {
		return h.cluster.URL(database), nil
	}
	return withDatabase(h.serverURL, database)
}

// dbName makes a unique, valid database name that says which test owns
// it: "t_<suffix>_<n>_<sanitised test name>", at most 63 bytes.
func (h *harness) dbName(testName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "t_%s_%d_", h.suffix, h.seq.Add(1))
	underscore := true
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			underscore = false
		case !underscore:
			b.WriteByte('_')
			underscore = true
		}
	}
	name := b.String()
	if len(name) > maxIdent {
		name = name[:maxIdent]
	}
	return strings.TrimRight(name, "_")
}

// withDatabase returns connString with its database replaced, for both
// forms pgx accepts: URL and keyword/value.
func withDatabase(connString, database string) (string, error) {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvURL, err)
		}
		u.Path = "/" + database
		u.RawPath = ""
		return u.String(), nil
	}
	// In keyword/value form a later keyword overrides an earlier one.
	return connString + " dbname='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(database) + "'", nil
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// minMemoryRoom is the room the memory file system (internal/memfs) must
// have for the cluster to go there: a container's /dev/shm is often 64 MB,
// too small for a cluster.
const minMemoryRoom = 2 << 30

// clusterParent is the directory the private cluster's directory goes
// in: the memory file system when it has minMemoryRoom free, else the
// temporary directory. Creating a test's database from the template and
// dropping it create and unlink hundreds of files, which costs a disk
// file system's journal several times what it costs in memory.
func clusterParent() string {
	if dir, ok := memfs.Dir(minMemoryRoom); ok {
		return dir
	}
	return os.TempDir()
}

// sweep removes private-cluster directories that earlier test binaries left
// when they died before Main's cleanup. A directory stays while its owner
// binary or its server is alive, or when it has no owner mark (it may be
// being created right now).
func sweep(tmpDir string) {
	dirs, _ := filepath.Glob(filepath.Join(tmpDir, dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		owner, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || alive(owner) {
			continue
		}
		pidFile, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			continue // unreadable: leave it alone
		default:
			line, _, _ := strings.Cut(string(pidFile), "\n")
			if pid, err := strconv.Atoi(strings.TrimSpace(line)); err != nil || alive(pid) {
				continue
			}
		}
		_ = os.RemoveAll(dir) // best effort: another binary may sweep it at the same time
	}
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
