package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"

	"stashd/harness/bench"
	"stashd/internal/memfs"
)

const benchHelp = `Measures every performance goal of stashd side by side with its baseline,
in one run, on the Telegram simulator and a private PostgreSQL: API economy
against a topic-by-topic poller and its skip rules, ingest against raw
inserts, hashing against crypto/sha256, latency under load, catch-up under
a 20 requests/s limit, peak memory under a huge backlog (the --daemon
binary run as its own process on the simulated world served over a
socket), and throughput with 1, 2 and 4 accounts. Prints a table on stderr
(what, stashd, baseline, ratio, goal); with --json the last line of stdout
is one JSON object with keys economy, ingest_vs_raw_insert,
ingest_vs_raw_txn, ingest_vs_raw_copy, pg_round_trips_per_package,
sends_per_part_multipart, hash_vs_raw_sha256, hash_vs_limit, drain_vs_send_budget, latency_p99_ms, catchup_vs_limit,
peak_rss_mb_1m, daemon_rss_mb, accounts_scale.

Without --database-url it starts a PostgreSQL cluster from the system's
binaries under --data-dir. It works in databases named stashd_bench_*,
which it drops and recreates.`

func runBench(args []string) int {
	fs := newFlagSet("bench", "bench [flags]", benchHelp)
	jsonOut := fs.Bool("json", false, "print the summary as one JSON object on the last line of stdout")
	quick := fs.Bool("quick", false, "a seconds-long smoke run (figures mean little)")
	only := fs.String("only", "", "comma-separated items to run ("+strings.Join(bench.Items(), ", ")+"); empty: all")
	daemonBin := fs.String("daemon", "bin/stashd-standin", "stashd binary linked against the stand-in libtdjson, run as the daemon of the memory item (make build-standin)")
	libDir := fs.String("lib-dir", "", "put this directory on the memory item's daemon's LD_LIBRARY_PATH")
	downloadsIn := fs.String("downloads-in", "", "make the simulated Telegram's download directory in this directory (removed at the end); empty: "+memfs.Path+
		" when it is a memory file system with 1 GB free, else the --data-dir's files/. On a disk, creating and unlinking the thousands of files "+
		"the simulator downloads costs kernel time that is TDLib's in production, not stashd's, and on some machines swings from run to run")
	dataDir := fs.String("data-dir", envOr("STASHD_DATA_DIR", "var/bench"), "directory for the embedded database and scratch files (env STASHD_DATA_DIR)")
	dbURL := fs.String("database-url", os.Getenv("STASHD_DATABASE_URL"), "PostgreSQL server to use instead of the embedded one; its role must create databases (env STASHD_DATABASE_URL)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	memProfile := fs.String("memprofile", "", "write a profile of the run's allocations to this file at its end (go tool pprof -sample_index=alloc_space)")
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

	if err := prepareScratchDir(*dataDir, *dbURL == ""); err != nil {
		fmt.Fprintf(os.Stderr, "stashd bench: --data-dir: %v\n", err)
		return 1
	}
	downloads, err := benchDownloads(*downloadsIn)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd bench: --downloads-in: %v\n", err)
		return 1
	}
	if downloads != "" {
		defer os.RemoveAll(downloads)
	}
	serverURL, _, stopDB, err := database(ctx, *dbURL, *dataDir, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd bench: %v\n", err)
		return 1
	}
	defer stopDB()
	o := bench.Options{
		ServerURL: serverURL, FilesDir: filepath.Join(*dataDir, "files"), DownloadsDir: downloads, Quick: *quick,
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
	if o.Only == nil || slices.Contains(o.Only, bench.ItemMemory) {
		if _, err := os.Stat(*daemonBin); err != nil {
			fmt.Fprintf(os.Stderr, "stashd bench: --daemon %s: %v (make build-standin builds it)\n", *daemonBin, err)
			return 2
		}
		if o.Daemon, err = filepath.Abs(*daemonBin); err != nil {
			fmt.Fprintf(os.Stderr, "stashd bench: --daemon: %v\n", err)
			return 2
		}
		o.LibDir = *libDir
	}
	if *memProfile != "" {
		defer func() {
			if err := writeAllocs(*memProfile); err != nil {
				fmt.Fprintf(os.Stderr, "stashd bench: memory profile: %v\n", err)
			}
		}()
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

// benchDownloads makes the directory for the simulated downloads in
// parent, or in the memory file system when parent is empty and it has
// room; "" means the bench's files directory (also when the memory file
// system refuses the directory).
func benchDownloads(parent string) (string, error) {
	if parent != "" {
		return os.MkdirTemp(parent, "stashd-bench-downloads-")
	}
	mem, ok := memfs.Dir(1 << 30)
	if !ok {
		return "", nil
	}
	dir, err := os.MkdirTemp(mem, "stashd-bench-downloads-")
	if err != nil {
		return "", nil
	}
	return dir, nil
}

// writeAllocs writes the allocations made since the process started to
// path, as pprof's allocs profile.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
