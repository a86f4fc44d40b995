package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// fatalRecorder is a testing.TB whose Fatal records instead of stopping.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper()                        {}
func (f *fatalRecorder) Fatal(args ...any)              { f.msg = fmt.Sprint(args...) }
func (f *fatalRecorder) Fatalf(format string, a ...any) { f.msg = fmt.Sprintf(format, a...) }

func TestNewWithoutMainFailsClearly(t *testing.T) {
	t.Parallel()
	var h *harness // what New finds when TestMain did not call Main
	rec := &fatalRecorder{TB: t}
	if url := h.newDatabase(rec); url != "" {
		t.Fatalf("newDatabase without Main returned %q", url)
	}
	if !strings.Contains(rec.msg, "does not call pgtest.Main") {
		t.Fatalf("failure message %q does not say that Main is missing", rec.msg)
	}
}

func TestDBName(t *testing.T) {
	t.Parallel()
	h := &harness{suffix: "0a1b2c3d"}
	valid := regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	long := "TestSomething/" + strings.Repeat("Very Long Sub-Test Name ", 10)
	seen := map[string]bool{}
	for _, test := range []string{"TestX", "TestX", "Test/With spaces & ÜNICODE", long} {
		name := h.dbName(test)
		if len(name) > maxIdent || !valid.MatchString(name) || !strings.HasPrefix(name, "t_0a1b2c3d_") {
			t.Errorf("dbName(%q) = %q: not a valid, prefixed identifier of at most 63 bytes", test, name)
		}
		if seen[name] {
			t.Errorf("dbName(%q) = %q repeats an earlier name", test, name)
		}
		seen[name] = true
	}
	if got := h.dbName("TestX/sub"); !strings.HasSuffix(got, "_testx_sub") {
		t.Errorf("dbName(TestX/sub) = %q, want it to end with the sanitised test name", got)
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"postgres://u:p@db.example:5433/orig?sslmode=disable",
		"postgresql://u@/orig?host=%2Ftmp%2Fsock",
		"host=db.example port=5433 user=u dbname=orig sslmode=disable",
	} {
		out, err := withDatabase(in, "t_x_1")
		if err != nil {
			t.Fatalf("withDatabase(%q): %v", in, err)
		}
		before, err := pgx.ParseConfig(in)
		if err != nil {
			t.Fatal(err)
		}
		after, err := pgx.ParseConfig(out)
		if err != nil {
			t.Fatalf("withDatabase(%q) = %q: %v", in, out, err)
		}
		if after.Database != "t_x_1" || after.Host != before.Host || after.Port != before.Port || after.User != before.User {
			t.Errorf("withDatabase(%q) = %q: database %q host %q port %d user %q", in, out, after.Database, after.Host, after.Port, after.User)
		}
	}
}

func TestHarnessCloseRemovesEverything(t *testing.T) {
	t.Parallel()
	h, err := newHarness(os.Getenv(EnvURL))
	if err != nil {
		t.Fatal(err)
	}
	// A directory the server user can traverse even when tests run as
	// root (t.TempDir is root's and 0700).
	tmp, err := os.MkdirTemp("", "pgtest-close-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	h.tmpDir = tmp
	ctx := context.Background()
	if err := h.create(ctx, "t_"+h.suffix+"_probe"); err != nil {
		t.Fatal(err)
	}
	cluster, dir, template, adminURL := h.cluster, h.dir, h.template, h.adminURL
	if err := h.close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if cluster == nil {
		// A shared server: the template must be gone from it.
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", template).Scan(&n); err != nil || n != 0 {
			t.Fatalf("template %s after close: count %d, %v", template, n, err)
		}
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident("t_"+h.suffix+"_probe")+" WITH (FORCE)")
		return
	}
	select {
	case <-cluster.Done():
	default:
		t.Fatal("cluster still running after close")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("cluster directory %s after close: %v", dir, err)
	}
}

func TestSweepRemovesOnlyAbandonedClusters(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name, owner string) string {
		dir := filepath.Join(tmp, dirPrefix+name)
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	abandoned := mk("abandoned", strconv.Itoa(dead.Process.Pid))
	live := mk("live", strconv.Itoa(os.Getpid()))
	unmarked := mk("unmarked", "")
	serverAlive := mk("server", strconv.Itoa(dead.Process.Pid))
	pidFile := strconv.Itoa(os.Getpid()) + "\n" + filepath.Join(serverAlive, "data") + "\n"
	if err := os.WriteFile(filepath.Join(serverAlive, "data", "postmaster.pid"), []byte(pidFile), 0o600); err != nil {
		t.Fatal(err)
	}

	sweep(tmp)

	for dir, wantGone := range map[string]bool{abandoned: true, live: false, unmarked: false, serverAlive: false} {
		_, err := os.Stat(dir)
		if gone := os.IsNotExist(err); gone != wantGone {
			t.Errorf("%s: removed = %v, want %v", filepath.Base(dir), gone, wantGone)
		}
	}
}

func TestMajorVersion(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]int{
		"15.8 (Debian 15.8-0+deb12u1)": 15, "14.13": 14, "17beta1": 17, "9.6.24": 9, "": 0, "devel": 0,
	} {
		if got := majorVersion(v); got != want {
			t.Errorf("majorVersion(%q) = %d, want %d", v, got, want)
		}
	}
}
