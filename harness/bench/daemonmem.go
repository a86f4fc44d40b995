package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"stashd/sim/tdjsonsim"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// daemonMemory is the memory probe on the daemon alone: the world, with a
// backlog of the given number of messages, is built in this process and
// served as TDLib JSON on a unix socket; the daemon runs as its own
// process (o.Daemon serve, linked against the stand-in libtdjson, as the
// chaos harness runs it), with no GOMEMLIMIT, 4 workers and the highest request rate serve takes (1,000/s),
// catching the backlog up for memoryWindow. Its peak RSS is its own
// VmHWM, read from /proc just before it is stopped.
func (r *runner) daemonMemory(ctx context.Context, backlog int) (MemoryResult, error) {
	name := "memory_" + strconv.Itoa(backlog)
	e, err := r.newEnv(ctx, name, 1, tgsim.Config{Seed: 6})
	if err != nil {
		return MemoryResult{}, err
	}
	defer e.close(ctx)
	if err := postBacklog(e, backlog); err != nil {
		return MemoryResult{}, err
	}
	dir, err := filepath.Abs(filepath.Join(r.o.FilesDir, name+"-serve"))
	if err != nil {
		return MemoryResult{}, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data", "accounts", e.accounts[0].Name, "database"), 0o700); err != nil {
		return MemoryResult{}, err
	}
	defer os.RemoveAll(dir)
	// A unix socket path holds at most 107 bytes.
	sock := filepath.Join(dir, "tdjson.sock")
	if len(sock) > 100 {
		if sock, err = filepath.Rel(".", sock); err != nil || len(sock) > 100 {
			return MemoryResult{}, fmt.Errorf("memory: %s is too long a path for the simulator's socket", dir)
		}
	}
	ln, err := tdjsonsim.Listen(sock)
	if err != nil {
		return MemoryResult{}, err
	}
	srv := tdjsonsim.New(e.world, tdjsonsim.Config{Logger: r.log})
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	defer srv.Close()

	config := filepath.Join(dir, "serve.toml")
	if err := os.WriteFile(config, []byte(serveConfig(e, filepath.Join(dir, "data"))), 0o600); err != nil {
		return MemoryResult{}, err
	}
	metrics, err := freeAddr()
	if err != nil {
		return MemoryResult{}, err
	}
	env := []string{
		"STASHD_TDJSON_SOCKET=" + sock, "STASHD_DATABASE_URL=" + e.url, "STASHD_METRICS_ADDR=" + metrics,
		"STASHD_WORKERS=4", "STASHD_RATE=1000", "STASHD_CATCHUP_INTERVAL=250ms",
		"STASHD_SET_SETTLE=300ms", "STASHD_SET_MAX_WAIT=2s", "STASHD_DRAIN_TIMEOUT=5s",
	}
	if r.o.LibDir != "" {
		env = append(env, "LD_LIBRARY_PATH="+r.o.LibDir)
	}
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return MemoryResult{}, err
	}
	defer logf.Close()
	cmd := exec.Command(r.o.Daemon, "serve", "--config", config)
	cmd.Env = append(withoutMemoryLimit(os.Environ()), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The parent-death signal fires when the thread that forked exits.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return MemoryResult{}, fmt.Errorf("start the daemon %s: %w (make build-standin builds it)", r.o.Daemon, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	select {
	case err := <-exited:
		return MemoryResult{}, fmt.Errorf("the daemon exited during the probe: %v; its log ends: %s", err, logTail(logf.Name()))
	case <-time.After(max(memoryWindow(r.o.Quick), 5*time.Second)): // a process takes seconds to start its accounts
	case <-ctx.Done():
		stop()
		return MemoryResult{}, ctx.Err()
	}
	cur, peak, err := rssOf(cmd.Process.Pid)
	elapsed := time.Since(start)
	stop()
	if err != nil {
		return MemoryResult{}, err
	}
	_ = cur
	n, err := e.count(ctx, countPackages)
	if err != nil {
		return MemoryResult{}, err
	}
	return MemoryResult{Backlog: backlog, PeakMB: peak, DaemonMB: peak, Packages: n, Seconds: elapsed.Seconds(), Separate: true}, nil
}

// postBacklog posts backlog messages over the env's sources, one in
// archiveEvery a small tar.gz, the others text.
func postBacklog(e *env, backlog int) error {
	var srcs []tg.ChatID
	for i := range 4 {
		srcs = append(srcs, e.addSource(0, tg.KindChannel, fmt.Sprintf("source %d", i)))
	}
	var tgz smallTarGz
	for i := range backlog {
		src := srcs[i%len(srcs)]
		if i%archiveEvery == 0 {
			e.world.Post(src, 0, tgsim.Post{FileName: tarGzName(i), Data: tgz.make(i)})
		} else {
			e.world.Post(src, 0, tgsim.Post{})
		}
	}
	return nil
}

// serveConfig is a `stashd serve` configuration for the env's world:
// its accounts and their sources, its destinations, placeholder
// credentials (the simulator takes any) and dataDir.
func serveConfig(e *env, dataDir string) string {
	var b strings.Builder
	b.WriteString("api_id = 1\napi_hash = \"00000000000000000000000000000000\"\n")
	fmt.Fprintf(&b, "data_dir = %q\n", dataDir)
	dests := make([]string, len(e.dests))
	for i, d := range e.dests {
		dests[i] = strconv.Quote(strconv.FormatInt(int64(d), 10))
	}
	fmt.Fprintf(&b, "destinations = [%s]\n", strings.Join(dests, ", "))
	for _, a := range e.accounts {
		srcs := make([]string, len(a.Sources))
		for i, s := range a.Sources {
			srcs[i] = strconv.Quote(strconv.FormatInt(int64(s), 10))
		}
		fmt.Fprintf(&b, "\n[[accounts]]\nname = %q\nsources = [%s]\n", a.Name, strings.Join(srcs, ", "))
	}
	return b.String()
}

// withoutMemoryLimit drops GOMEMLIMIT and GOGC from env: the figure is the
// daemon's own, under the runtime's defaults.
func withoutMemoryLimit(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "GOGC=") {
			out = append(out, kv)
		}
	}
	return out
}

// freeAddr returns a loopback address with a port free at the time of the
// call.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// logTail returns the last lines of the log at path.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b[max(0, len(b)-2000):])
}
