package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

var (
	cliOnce sync.Once
	cliBin  string
	cliErr  error
)

// cliBinary builds stashd once for the command-line tests.
func cliBinary(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stashd-cli")
		if err != nil {
			cliErr = err
			return
		}
		cliBin = filepath.Join(dir, "stashd")
		out, err := exec.Command("go", "build", "-o", cliBin, ".").CombinedOutput()
		if err != nil {
			cliErr = &buildError{err, string(out)}
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliBin
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// run runs stashd with args and env (added to a clean environment without
// STASHD_* variables) in dir, and returns its exit status, stdout and
// stderr.
func run(t *testing.T, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(cliBinary(t), args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STASHD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // a safety net: these commands end at once
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("stashd %v did not exit\nstderr:\n%s", args, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

func oneLineNaming(t *testing.T, what, out, name string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], name) {
		t.Errorf("%s: output %q: want one line naming %s", what, out, name)
	}
}

func TestDeadLettersRetryNamesAChannel(t *testing.T) {
	dbURL := pgtest.New(t)
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	key := tg.MessageKey{Chat: -1001000000002, Message: tg.MessageIDFromServer(17)}
	err = st.RecordDeadLetter(ctx, store.DeadLetter{Key: key, Account: "a", ErrorClass: "permanent", Reason: "test"}, store.SourceMessage{FileName: "x.zip"})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"deadletters", "retry", "-1001000000002/17", "--database-url", dbURL},
		{"deadletters", "--database-url", dbURL, "retry", "--", "-1001000000002/17"},
	} {
		code, stdout, stderr := run(t, dir, nil, args...)
		if code != 0 || !strings.Contains(stdout, "1 dead letter(s) scheduled") {
			t.Errorf("stashd %q: exit %d\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
		}
	}
}

// Read-only commands never create a cluster, a database or a catalogue,
// and say where they looked.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo")
	for _, args := range [][]string{
		{"status", "--data-dir", missing},
		{"deadletters", "list", "--data-dir", missing},
	} {
		code, _, stderr := run(t, dir, nil, args...)
		if code == 0 {
			t.Errorf("stashd %q: exit 0", args)
		}
		oneLineNaming(t, strings.Join(args, " "), stderr, missing)
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Fatalf("stashd %q created %s (stat: %v)", args, missing, err)
		}
	}

	// A server without the named database, and a database without a
	// catalogue.
	dbURL := pgtest.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	empty := "stashd_cli_empty"
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+empty)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+empty); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+empty+" WITH (FORCE)") }()
	for _, name := range []string{"stashd_cli_nosuch", empty} {
		for _, cmd := range [][]string{{"status"}, {"deadletters", "list"}} {
			args := append(cmd, "--database-url", dbURL, "--database", name)
			code, stdout, stderr := run(t, dir, nil, args...)
			if code == 0 {
				t.Errorf("stashd %q: exit 0, stdout:\n%s", args, stdout)
			}
			oneLineNaming(t, strings.Join(args, " "), stderr, name)
		}
	}
	var exists, tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = 'stashd_cli_nosuch'`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists != 0 {
		t.Error("a read-only command created a database")
	}
	emptyURL, err := withDatabase(dbURL, empty)
	if err != nil {
		t.Fatal(err)
	}
	econn, err := pgx.Connect(ctx, emptyURL)
	if err != nil {
		t.Fatal(err)
	}
	defer econn.Close(ctx)
	if err := econn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("a read-only command created %d tables in an empty database", tables)
	}
}

const cliHash = "0123456789abcdef0123456789abcdef"

// An account never logged in is reported before the database is started
// or created.
func TestServeWithoutLoginStartsNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "stashd.toml")
	data := filepath.Join(dir, "data")
	body := "api_id = 1\napi_hash = \"" + cliHash + "\"\ndata_dir = \"" + data + "\"\ndestinations = [\"@mirror_x\"]\n[[accounts]]\nname = \"main\"\nsources = [\"@abcd\"]\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, dir, nil, "serve", "--config", cfg, "--metrics-addr", "off")
	if code == 0 {
		t.Fatal("exit 0")
	}
	oneLineNaming(t, "serve", stderr, "not logged in")
	if _, err := os.Stat(filepath.Join(data, "postgres")); !os.IsNotExist(err) {
		t.Errorf("the embedded database was created before the login check (stat: %v)", err)
	}
}

// Every bad setting is one line naming where it came from — the flag, the
// variable or the file's line — with exit status 2, found before anything
// starts; explicit zeros are values, not "use the default".
func TestServeConfigErrorsNameTheirSource(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "stashd.toml")
	if err := os.WriteFile(cfg, []byte("log_level = \"info\"\n\nworkers = 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		env  []string
		args []string
		name string
	}{
		{nil, []string{"--workers", "0"}, "--workers"},
		{nil, []string{"--rate", "0"}, "--rate"},
		{nil, []string{"--workers", "many"}, "--workers"},
		{nil, []string{"--metrics-addr", "nonsense"}, "--metrics-addr"},
		{nil, []string{"--database-url", "notaurl"}, "--database-url"},
		{nil, []string{"--drain-timeout", "0s"}, "--drain-timeout"},
		{[]string{"STASHD_WORKERS=0"}, nil, "STASHD_WORKERS"},
		{[]string{"STASHD_METRICS_ADDR=nonsense"}, nil, "STASHD_METRICS_ADDR"},
		{nil, []string{"--config", cfg}, cfg + ":3"},
		// A flag overrides the file: the file's line is not blamed for
		// the flag's value.
		{nil, []string{"--config", cfg, "--workers", "300"}, "--workers"},
	}
	for _, tc := range cases {
		args := append([]string{"serve", "--simulate"}, tc.args...)
		code, _, stderr := run(t, dir, tc.env, args...)
		if code != 2 {
			t.Errorf("stashd %q (env %q): exit %d, want 2; stderr:\n%s", args, tc.env, code, stderr)
		}
		oneLineNaming(t, strings.Join(args, " "), stderr, tc.name)
	}
	if _, err := os.Stat(filepath.Join(dir, "var")); !os.IsNotExist(err) {
		t.Errorf("a bad configuration created the data directory (stat: %v)", err)
	}
}

// A database that does not answer is one line, its dial error once.
func TestServeDeadDatabaseIsOneLine(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := run(t, dir, nil, "serve", "--simulate", "--data-dir", filepath.Join(dir, "data"),
		"--database-url", "postgres://stashd@localhost:1/stashd", "--metrics-addr", "off", "--log-format", "text")
	if code == 0 {
		t.Fatal("exit 0")
	}
	oneLineNaming(t, "dead database", stderr, "localhost:1")
	if n := strings.Count(stderr, "connection refused"); n > 1 {
		t.Errorf("the dial error is repeated %d times: %s", n, stderr)
	}
}

// --help is on stdout with exit 0, flags show their types, and each
// command lists only its own flags.
func TestHelpListsTypedFlagsOnStdout(t *testing.T) {
	dir := t.TempDir()
	code, stdout, _ := run(t, dir, nil, "serve", "--help")
	if code != 0 || !strings.Contains(stdout, "--workers int") || !strings.Contains(stdout, "--drain-timeout duration") {
		t.Errorf("serve --help: exit %d, stdout:\n%s", code, stdout)
	}
	if !strings.Contains(stdout, "var/simulate") {
		t.Errorf("serve --help does not say where --simulate keeps its data:\n%s", stdout)
	}
	code, stdout, _ = run(t, dir, nil, "login", "--help")
	if code != 0 || strings.Contains(stdout, "--workers") || strings.Contains(stdout, "--rescan-window") || !strings.Contains(stdout, "--account string") {
		t.Errorf("login --help: exit %d, lists daemon flags or misses --account:\n%s", code, stdout)
	}
	code, stdout, _ = run(t, dir, nil, "version", "--help")
	if code != 0 || strings.Contains(stdout, "Flags:") {
		t.Errorf("version --help: exit %d, stdout:\n%s", code, stdout)
	}
	code, _, stderr := run(t, dir, nil, "status", "--nope")
	if code != 2 {
		t.Errorf("status --nope: exit %d, want 2", code)
	}
	oneLineNaming(t, "status --nope", stderr, "--nope")
}

// The read-only commands check their flags before opening anything.
func TestReadOnlyCommandsCheckTheURLFirst(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"status", "--database-url", "notaurl"}, {"deadletters", "list", "--database-url", "notaurl"}} {
		code, _, stderr := run(t, dir, nil, args...)
		if code != 2 {
			t.Errorf("stashd %q: exit %d, want 2", args, code)
		}
		oneLineNaming(t, strings.Join(args, " "), stderr, "--database-url")
	}
}

// A database URL from STASHD_DATABASE_URL or the --config file is named
// as such in errors, not as --database-url, which was not given.
func TestCatalogueCommandsNameTheURLsSource(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "stashd.toml")
	if err := os.WriteFile(cfg, []byte("database_url = 'notaurl'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := "postgres://stash@localhost:1/stashd?sslmode=disable"
	for _, tc := range []struct {
		env   []string
		args  []string
		code  int
		shown string
	}{
		{[]string{"STASHD_DATABASE_URL=notaurl"}, []string{"status"}, 2, "STASHD_DATABASE_URL"},
		{[]string{"STASHD_DATABASE_URL=" + refused}, []string{"status"}, 1, "STASHD_DATABASE_URL"},
		{[]string{"STASHD_DATABASE_URL=" + refused}, []string{"search", "x"}, 1, "STASHD_DATABASE_URL"},
		{nil, []string{"status", "--config", cfg}, 2, cfg + ": database_url"},
	} {
		code, _, stderr := run(t, dir, tc.env, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.shown) || strings.Contains(stderr, "--database-url") {
			t.Errorf("stashd %q (env %q): exit %d, stderr %q: want %d, naming %s and not --database-url", tc.args, tc.env, code, stderr, tc.code, tc.shown)
		}
	}
}
