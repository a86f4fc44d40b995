package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// buildStashd builds the binary under test (without TDLib: serve runs on
// the simulator here).
func buildStashd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stashd")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The daemon under a fake systemd: READY=1 once up, WATCHDOG=1 while
// healthy, STOPPING=1 on SIGTERM, then a graceful drain and exit 0 with no
// delivery left half done.
func TestServeNotifiesSystemd(t *testing.T) {
	bin := buildStashd(t)
	dir := t.TempDir()
	sockPath := filepath.Join(dir, "notify.sock")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	dbURL := pgtest.New(t)
	addr := freeAddr(t)

	cmd := exec.Command(bin, "serve", "--simulate", "--simulate-rate", "40",
		"--data-dir", filepath.Join(dir, "data"), "--metrics-addr", addr, "--log-format", "json")
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sockPath, "WATCHDOG_USEC=300000", "STASHD_DATABASE_URL="+dbURL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()

	var seen []string
	await := func(state string) {
		t.Helper()
		buf := make([]byte, 4096)
		for {
			_ = sock.SetReadDeadline(time.Now().Add(60 * time.Second))
			n, err := sock.Read(buf)
			if err != nil {
				t.Fatalf("waiting for %s (seen %v): %v\nstderr:\n%s", state, seen, err, stderr.String())
			}
			for _, line := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
				seen = append(seen, line)
				if line == state {
					return
				}
			}
		}
	}
	await("READY=1")
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/metrics": "stashd_ingest_queue_capacity", "/console/": "Dead letters"} {
		body, code := get(t, "http://"+addr+path)
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d %q, want 200 with %q", path, code, body, want)
		}
	}
	await("WATCHDOG=1")
	// Stop only once the daemon has catalogued something, so that the
	// drain below has work to finish (on a loaded machine the first
	// package may take a while).
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM packages`).Scan(&n); err == nil && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon catalogued nothing in 60 s\nstderr:\n%s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await("STOPPING=1")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	order := map[string]int{}
	for i, s := range seen {
		if _, ok := order[s]; !ok {
			order[s] = i
		}
	}
	if !(order["READY=1"] < order["WATCHDOG=1"] && order["WATCHDOG=1"] < order["STOPPING=1"]) {
		t.Errorf("notifications out of order: %v", seen)
	}

	// The drain finished every delivery it started.
	var intents int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM deliveries WHERE state = 'intent'`).Scan(&intents); err != nil {
		t.Fatal(err)
	}
	if intents != 0 {
		t.Errorf("%d deliveries left as intents after a graceful stop", intents)
	}
}

// A bad configuration is one line naming the field, exit status 2, and
// nothing started.
func TestServeBadConfigExits2(t *testing.T) {
	bin := buildStashd(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "stashd.toml")
	body := "api_id = 1\napi_hash = \"0123456789abcdef0123456789abcdef\"\nworkerz = 3\ndestinations = [\"@mirror_x\"]\n[[accounts]]\nname = \"a\"\nsources = [\"@abcd\"]\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfg, "--data-dir", filepath.Join(dir, "data"))
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit = %v, want status 2; output:\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "workerz") {
		t.Errorf("output %q: want one line naming workerz", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("data directory created for a bad configuration (stat: %v)", err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return "", 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

// --simulate-rate outside 0.001..1000 (NaN and Inf included; 0 publishes
// nothing) is one line and exit status 2 before anything is created.
func TestServeSimulateRateOutOfRangeExits2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, rate := range []string{"NaN", "Inf", "+Inf", "-Inf", "1e-300", "0.0009", "-1", "1001", "1e300"} {
		data := filepath.Join(dir, "data-"+rate)
		code, stdout, stderr := run(t, dir, nil, "serve", "--simulate", "--metrics-addr", "off", "--data-dir", data, "--simulate-rate", rate)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "stashd serve: --simulate-rate: ") || stdout != "" {
			t.Errorf("--simulate-rate %s: exit %d, stderr %q: want 2 and one line naming --simulate-rate", rate, code, stderr)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("--simulate-rate %s: data directory created (stat: %v)", rate, err)
		}
	}
}

// Several bad [[routes]] fields are one line each, every line prefixed
// with the command, from serve's configuration and demo's --routes.
func TestRouteErrorsEachLinePrefixed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	routes := "[[routes]]\nname = \"a\"\n[[routes]]\nname = \"b\"\nsources = [\"not a chat\"]\n"
	cfg := filepath.Join(dir, "stashd.toml")
	body := "api_id = 1\napi_hash = \"0123456789abcdef0123456789abcdef\"\n[[accounts]]\nname = \"a\"\nsources = [\"@abcd\"]\n" + routes
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	rf := filepath.Join(dir, "routes.toml")
	if err := os.WriteFile(rf, []byte(routes), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		prefix string
	}{
		{[]string{"serve", "--simulate", "--config", cfg, "--data-dir", filepath.Join(dir, "data")}, "stashd serve: "},
		{[]string{"demo", "--routes", rf, "--data-dir", filepath.Join(dir, "demo")}, "stashd demo: --routes: "},
	} {
		code, _, stderr := run(t, dir, nil, tc.args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || len(lines) < 3 {
			t.Errorf("stashd %q: exit %d, stderr %q: want 2 and a line per bad route field", tc.args, code, stderr)
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, tc.prefix) || !strings.Contains(l, "routes[") {
				t.Errorf("stashd %q: line %q lacks the prefix %q or the field", tc.args, l, tc.prefix)
			}
		}
	}
}

// A metrics_addr that cannot be bound is a bad setting: one line, exit
// status 2, before the data directory or the database is created.
func TestServeMetricsAddrInUseExits2(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	code, _, stderr := run(t, dir, nil, "serve", "--simulate", "--metrics-addr", ln.Addr().String(), "--data-dir", data)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "stashd serve: metrics_addr: ") {
		t.Errorf("metrics_addr in use: exit %d, stderr %q: want 2 and one line naming metrics_addr", code, stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("metrics_addr in use: data directory created (stat: %v)", err)
	}
}
