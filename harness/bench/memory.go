package bench

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"stashd/sim/tgsim"
)

// MemoryResult is one memory probe: a backlog caught up by the daemon in
// a process of its own, with the simulated world in the same process.
type MemoryResult struct {
	// Backlog is the number of messages (one in ten an archive).
	Backlog int `json:"backlog"`
	// WorldMB is the process's RSS once the world is built and collected,
	// before the daemon starts: the simulator's share, not stashd's.
	WorldMB float64 `json:"world_mb"`
	// PeakMB is the process's peak RSS while the daemon ran (VmHWM, reset
	// when the daemon started); DaemonMB is PeakMB − WorldMB.
	PeakMB   float64 `json:"peak_mb"`
	DaemonMB float64 `json:"daemon_mb"`
	// DaemonLiveMB is the most live heap (after a collection) the daemon
	// held on top of the world's: what would grow with the backlog if
	// anything did.
	DaemonLiveMB float64 `json:"daemon_live_mb"`
	// Packages catalogued in Seconds.
	Packages int     `json:"packages"`
	Seconds  float64 `json:"seconds"`
	// Separate is true when the daemon ran as a process of its own
	// (PeakMB is then its VmHWM alone, and WorldMB zero).
	Separate bool `json:"separate"`
}

// memoryWindow is how long a probe lets the daemon catch up: long enough
// for every buffer and queue to fill (the backlog does not fit in it, so
// the backlog's size is what varies, not the work done).
func memoryWindow(quick bool) time.Duration {
	if quick {
		return time.Second
	}
	return 20 * time.Second
}

// RunMemory is the memory probe, run in a child process by `stashd bench
// --child memory`: it builds a world with a backlog of the given number of
// messages over four channels of one account, then catches it up with the
// daemon (4 workers, no rate limit) for a fixed window and reports the
// process's RSS.
func RunMemory(ctx context.Context, o Options, backlog int) (MemoryResult, error) {
	r := &runner{o: o, log: o.Logger, rep: &Report{}}
	if r.log == nil {
		r.log = discard()
	}
	name := "memory_" + strconv.Itoa(backlog)
	e, err := r.newEnv(ctx, name, 1, tgsim.Config{Seed: 6})
	if err != nil {
		return MemoryResult{}, err
	}
	defer e.close(ctx)
	if err := postBacklog(e, backlog); err != nil {
		return MemoryResult{}, err
	}
	runtime.GC()
	debug.FreeOSMemory()
	world, _, err := rss()
	if err != nil {
		return MemoryResult{}, err
	}
	worldLive := liveHeap()
	// The daemon gets a budget of memoryBudget on top of the world, as a
	// deployment gives it GOMEMLIMIT: without it the collector's target
	// (twice the live heap) would grow with the world's heap, and the
	// daemon's garbage with it, which says nothing about stashd.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(int64((world + memoryBudget) * (1 << 20))))
	// Reset the peak (VmHWM) to the current RSS: from here on it is the
	// daemon's peak on top of the world.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return MemoryResult{}, fmt.Errorf("reset peak RSS: %w", err)
	}
	start := time.Now()
	d, err := e.start(ctx, e.daemonConfig(4, 0), nil)
	if err != nil {
		return MemoryResult{}, err
	}
	peakLive := worldLive
	window := time.After(memoryWindow(o.Quick))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-tick.C:
			peakLive = max(peakLive, liveHeap())
		case <-window:
			break wait
		case <-ctx.Done():
			d.Shutdown(context.Background())
			return MemoryResult{}, ctx.Err()
		}
	}
	_, peak, err := rss()
	elapsed := time.Since(start)
	d.Shutdown(context.Background())
	if err != nil {
		return MemoryResult{}, err
	}
	n, err := e.count(ctx, countPackages)
	if err != nil {
		return MemoryResult{}, err
	}
	return MemoryResult{Backlog: backlog, WorldMB: world, PeakMB: peak, DaemonMB: peak - world,
		DaemonLiveMB: float64(peakLive-worldLive) / (1 << 20), Packages: n, Seconds: elapsed.Seconds()}, nil
}

// memoryBudget is the memory limit, in MB, the probe gives the daemon on
// top of the simulated world: the goal.
const memoryBudget = 150

// liveHeap returns the heap live after the last collection, in bytes.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// smallTarGz builds, for each n, a tar.gz of one small file unique to n:
// cheap to build by the hundred thousand (one compressor, reset), small in
// the simulated world, and by name never a volume of a multipart set. Its
// zero value is ready; it is not safe for concurrent use.
type smallTarGz struct {
	tarBuf, out bytes.Buffer
	gz          *gzip.Writer
}

// tarGzName is the file name package n is posted under.
func tarGzName(n int) string { return fmt.Sprintf("pkg-%d.tar.gz", n) }

// make returns the tar.gz of package n. Writing into memory cannot fail:
// an error is a bug, and panics.
func (s *smallTarGz) make(n int) []byte {
	s.tarBuf.Reset()
	tw := tar.NewWriter(&s.tarBuf)
	body := fmt.Appendf(nil, "payload %d", n)
	s.out.Reset()
	if s.gz == nil {
		s.gz, _ = gzip.NewWriterLevel(&s.out, gzip.BestSpeed)
	} else {
		s.gz.Reset(&s.out)
	}
	err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("dir/file-%d.txt", n), Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	if err == nil {
		_, err = tw.Write(body)
	}
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		_, err = s.gz.Write(s.tarBuf.Bytes())
	}
	if err == nil {
		err = s.gz.Close()
	}
	if err != nil {
		panic(fmt.Sprintf("build tar.gz %d in memory: %v", n, err))
	}
	return bytes.Clone(s.out.Bytes())
}

// rss returns the process's current and peak resident set size in MB.
func rss() (cur, peak float64, err error) { return rssOf(0) }

// rssOf returns process pid's current and peak resident set size in MB
// (VmRSS and VmHWM); pid 0 is this process.
func rssOf(pid int) (cur, peak float64, err error) {
	status := "/proc/self/status"
	if pid != 0 {
		status = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	f, err := os.Open(status)
	if err != nil {
		return 0, 0, fmt.Errorf("read RSS: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "VmRSS" && k != "VmHWM" {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse %s %q: %w", k, v, err)
		}
		if k == "VmRSS" {
			cur = kb / 1024
		} else {
			peak = kb / 1024
		}
	}
	return cur, peak, sc.Err()
}

// memory measures item 6: the daemon's peak RSS while catching up backlogs
// of 10k, 100k and 1M messages (goal: ≤ 80 MB at 1M, and at most twice
// the 10k figure). With Options.Daemon the daemon runs as its own process
// (daemonMemory); without, it shares this process with the world
// (RunMemory), which is only good for a smoke run.
func (r *runner) memory(ctx context.Context) error {
	sizes := []int{10_000, 100_000, 1_000_000}
	keys := []string{"10k", "100k", "1m"}
	if r.o.Quick {
		sizes, keys = []int{1_000, 5_000}, []string{"1k", "5k"}
	}
	probe := func(ctx context.Context, n int) (MemoryResult, error) { return RunMemory(ctx, r.o, n) }
	if r.o.Daemon != "" {
		probe = r.daemonMemory
	}
	out := map[string]float64{}
	var first, last MemoryResult
	for i, n := range sizes {
		res, err := probe(ctx, n)
		if err != nil {
			return err
		}
		if i == 0 {
			first = res
		}
		note := fmt.Sprintf("VmHWM of the daemon's own process (stand-in libtdjson, world served over its socket), no GOMEMLIMIT; "+
			"%d packages catalogued in %.0fs", res.Packages, res.Seconds)
		if !res.Separate {
			note = fmt.Sprintf("in-process smoke figure: process peak %.0f MB minus the simulated world's %.0f MB, GOMEMLIMIT = world + %d MB; "+
				"live heap at most %.1f MB; %d packages catalogued in %.0fs",
				res.PeakMB, res.WorldMB, memoryBudget, res.DaemonLiveMB, res.Packages, res.Seconds)
		}
		r.add(Line{Item: ItemMemory, What: fmt.Sprintf("peak RSS catching up %d messages", n), Unit: "MB",
			Stashd: res.DaemonMB, Baseline: nanRatio, Ratio: nanRatio, Goal: "<= 80", Note: note})
		out[keys[i]] = res.DaemonMB
		last = res
	}
	r.add(Line{Item: ItemMemory, What: "peak RSS, largest backlog over smallest", Unit: "x",
		Stashd: ratio(last.DaemonMB, first.DaemonMB), Baseline: nanRatio, Ratio: nanRatio, Goal: "<= 2"})
	r.rep.Summary.PeakRSSMB1M = ptr(last.DaemonMB)
	r.rep.Summary.DaemonRSSMB = out
	return nil
}
