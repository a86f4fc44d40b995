package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"stashd/harness/bench"
)

const benchHelp = `Measures every performance goal of stashd side by side with its baseline,
in one run, on the Telegram simulator and a private PostgreSQL: API economy
against a topic-by-topic poller and its skip rules, ingest against raw
inserts, hashing against crypto/sha256, latency under load, catch-up under
a 20 requests/s limit, peak memory under a huge backlog (in a child
process), and throughput with 1, 2 and 4 accounts. Prints a table on stderr
(what, stashd, baseline, ratio, goal); with --json the last line of stdout
is one JSON object with keys economy, ingest_vs_raw_insert,
hash_vs_raw_sha256, latency_p99_ms, catchup_vs_limit, peak_rss_mb_1m,
accounts_scale.

Without --database-url it starts a PostgreSQL cluster from the system's
binaries under --data-dir. It works in databases named stashd_bench_*,
which it drops and recreates.`

func runBench(args []string) int {
	fs := newFlagSet("bench", "bench [flags]", benchHelp)
	jsonOut := fs.Bool("json", false, "print the summary as one JSON object on the last line of stdout")
	quick := fs.Bool("quick", false, "a seconds-long smoke run (figures mean little)")
	only := fs.String("only", "", "comma-separated items to run ("+strings.Join(bench.Items(), ", ")+"); empty: all")
	child := fs.String("child", "", "internal: run one probe in this process (memory) and print its result")
	backlog := fs.Int("backlog", 0, "internal: backlog size of a --child memory probe")
	dataDir := fs.String("data-dir", envOr("STASHD_DATA_DIR", "var/bench"), "directory for the embedded database and scratch files (env STASHD_DATA_DIR)")
	dbURL := fs.String("database-url", os.Getenv("STASHD_DATABASE_URL"), "PostgreSQL server to use instead of the embedded one; its role must create databases (env STASHD_DATABASE_URL)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	verbose := fs.Bool("v", false, "log at debug level")
	if rc := parse(fs, args); rc >= 0 {
		return rc
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := newLogger(os.Stderr, level)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := prepareScratchDir(*dataDir); err != nil {
		fmt.Fprintf(os.Stderr, "stashd bench: --data-dir: %v\n", err)
		return 1
	}
	serverURL, _, stopDB, err := database(ctx, *dbURL, *dataDir, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd bench: %v\n", err)
		return 1
	}
	defer stopDB()
	o := bench.Options{
		ServerURL: serverURL, FilesDir: filepath.Join(*dataDir, "files"), Quick: *quick,
		Logger: log, Progress: os.Stderr,
	}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stashd bench: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "stashd bench: cpu profile: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *child != "" {
		if *child != "memory" || *backlog <= 0 {
			fmt.Fprintln(os.Stderr, "stashd bench: --child memory needs --backlog > 0")
			return 2
		}
		res, err := bench.RunMemory(ctx, o, *backlog)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stashd bench: memory probe: %v\n", err)
			return 1
		}
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
		return 0
	}
	o.Memory = func(ctx context.Context, n int) (bench.MemoryResult, error) {
		return memoryChild(ctx, serverURL, *dataDir, *quick, n)
	}
	rep, err := bench.Run(ctx, o)
	rep.WriteTable(os.Stderr)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "stashd bench: interrupted")
			return 130
		}
		fmt.Fprintf(os.Stderr, "stashd bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "stashd bench: %.0fs\n", rep.Seconds)
	if *jsonOut {
		b, err := rep.JSON()
		if err != nil {
			fmt.Fprintf(os.Stderr, "stashd bench: %v\n", err)
			return 1
		}
		fmt.Println(string(b))
	}
	return 0
}

// memoryChild runs the memory probe in a child process (this executable,
// `bench --child memory`), so that only the probe's own memory counts, and
// returns the JSON line it prints.
func memoryChild(ctx context.Context, serverURL, dataDir string, quick bool, backlog int) (bench.MemoryResult, error) {
	self, err := os.Executable()
	if err != nil {
		return bench.MemoryResult{}, fmt.Errorf("find own executable: %w", err)
	}
	args := []string{"bench", "--child", "memory", "--backlog", strconv.Itoa(backlog),
		"--database-url", serverURL, "--data-dir", dataDir}
	if quick {
		args = append(args, "--quick")
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return bench.MemoryResult{}, fmt.Errorf("run memory probe: %w", err)
	}
	var last string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		last = sc.Text()
	}
	var res bench.MemoryResult
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		return bench.MemoryResult{}, fmt.Errorf("read memory probe result %q: %w", last, err)
	}
	return res, nil
}
