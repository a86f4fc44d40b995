package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"stashd/internal/service"
)

// How often the harness asks every daemon whether it is ready, and samples
// its memory, goroutines and open files.
const (
	readyPoll  = 250 * time.Millisecond
	samplePoll = 5 * time.Second
)

// warmUp is how long a daemon process runs before its resources are first
// sampled as its "start": the first minute allocates the pools, caches and
// buffers a daemon keeps.
const warmUp = time.Minute

// Resources is one daemon process's memory, goroutines and open files.
type Resources struct {
	Instance int `json:"instance"`
	PID      int `json:"pid"`
	// RSSMB is the resident set in MiB: at the first sample after warm-up
	// (start), at the last (end), and the most of any sample (max).
	RSSMB struct {
		Start float64 `json:"start"`
		End   float64 `json:"end"`
		Max   float64 `json:"max"`
	} `json:"rss_mb"`
	Goroutines struct {
		Start int `json:"start"`
		End   int `json:"end"`
	} `json:"goroutines"`
	OpenFDs struct {
		Start int `json:"start"`
		End   int `json:"end"`
	} `json:"open_fds"`
	// Samples counts the samples after warm-up; zero when the process
	// did not live through its warm-up (start and end are then empty).
	Samples int `json:"samples"`
}

// observer watches every daemon process through the run: readiness after
// its first ready, and its resources.
type observer struct {
	mu sync.Mutex
	// notReady is the time daemons answered /readyz with anything but
	// 200 after they had first been ready, struck processes aside.
	notReady time.Duration
	procs    map[*proc]*procWatch
	order    []*procWatch
	// csv, when set, receives every sample as a line: seconds since the
	// run started, instance, pid, rss MiB, goroutines, open fds.
	csv     io.Writer
	started time.Time
}

// procWatch is what the observer knows of one process.
type procWatch struct {
	res      Resources
	started  time.Time
	ready    bool      // answered ready at least once
	downAt   time.Time // when it last stopped answering ready; zero while ready
	struck   bool      // killed or paused by the harness: no longer judged
	lastPoll time.Time
}

func newObserver() *observer { return &observer{procs: map[*proc]*procWatch{}, started: time.Now()} }

// strike marks p as killed or paused by the harness: from then on its
// readiness says nothing about the daemon.
func (o *observer) strike(p *proc) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w := o.procs[p]; w != nil {
		w.struck = true
	}
}

// watch returns p's record, made on first sight.
func (o *observer) watch(in *instance, p *proc) *procWatch {
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.procs[p]
	if w == nil {
		w = &procWatch{started: time.Now()}
		w.res.Instance, w.res.PID = in.n, p.pid()
		o.procs[p] = w
		o.order = append(o.order, w)
	}
	return w
}

// run polls readiness every readyPoll and samples resources every
// samplePoll until ctx ends.
func (o *observer) run(ctx context.Context, h *harness) {
	var wg sync.WaitGroup
	wg.Go(func() {
		service.Every(ctx, readyPoll, nil, func(ctx context.Context) {
			for _, in := range h.instances {
				if p := h.process(in); p != nil {
					o.pollReady(ctx, in, p)
				}
			}
		})
	})
	wg.Go(func() {
		service.Every(ctx, samplePoll, nil, func(ctx context.Context) {
			for _, in := range h.instances {
				if p := h.process(in); p != nil {
					o.sample(ctx, in, p)
				}
			}
		})
	})
	wg.Wait()
}

// pollReady asks p's /readyz once and adds any time it spent not ready
// since its first ready.
func (o *observer) pollReady(ctx context.Context, in *instance, p *proc) {
	w := o.watch(in, p)
	ready := get(ctx, "http://"+in.metrics+"/readyz") == http.StatusOK
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if w.struck {
		return
	}
	switch {
	case ready && !w.downAt.IsZero():
		o.notReady += now.Sub(w.downAt)
		w.downAt = time.Time{}
	case !ready && w.ready && w.downAt.IsZero():
		w.downAt = now
	}
	w.ready = w.ready || ready
	w.lastPoll = now
}

// sample reads p's resident set and open files from /proc and its
// goroutines from its metrics, once it has warmed up.
func (o *observer) sample(ctx context.Context, in *instance, p *proc) {
	w := o.watch(in, p)
	if time.Since(w.started) < warmUp {
		return
	}
	rss, ok := rssMB(p.pid())
	if !ok {
		return // gone meanwhile
	}
	fds := openFDs(p.pid())
	g := goroutines(ctx, in.metrics)
	o.mu.Lock()
	defer o.mu.Unlock()
	r := &w.res
	if r.Samples == 0 {
		r.RSSMB.Start, r.Goroutines.Start, r.OpenFDs.Start = rss, g, fds
	}
	r.Samples++
	r.RSSMB.End, r.Goroutines.End, r.OpenFDs.End = rss, g, fds
	r.RSSMB.Max = max(r.RSSMB.Max, rss)
	if o.csv != nil {
		fmt.Fprintf(o.csv, "%.0f,%d,%d,%.1f,%d,%d\n", time.Since(o.started).Seconds(), r.Instance, r.PID, rss, g, fds)
	}
}

// result closes the stretches still open and returns the time not ready
// and the resources of every process that lived through its warm-up, in
// the order the processes were seen.
func (o *observer) result() (time.Duration, []Resources) {
	o.mu.Lock()
	defer o.mu.Unlock()
	total := o.notReady
	out := make([]Resources, 0, len(o.order))
	for _, w := range o.order {
		if !w.struck && !w.downAt.IsZero() {
			total += w.lastPoll.Sub(w.downAt)
		}
		if w.res.Samples > 0 {
			out = append(out, w.res)
		}
	}
	return total, out
}

// get returns the status of a GET of url, 0 when there is no answer.
func get(ctx context.Context, url string) int {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// rssMB reads a process's resident set (VmRSS) in MiB.
func rssMB(pid int) (float64, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}

// openFDs counts a process's open file descriptors.
func openFDs(pid int) int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// goroutines reads go_goroutines from a daemon's metrics; 0 when it
// cannot.
func goroutines(ctx context.Context, addr string) int {
	v, ok := metric(ctx, addr, "go_goroutines")
	if !ok {
		return 0
	}
	return int(v)
}

// metric reads the first sample of the named metric from a daemon's
// /metrics.
func metric(ctx context.Context, addr, name string) (float64, bool) {
	vs := samples(ctx, addr, name)
	if len(vs) == 0 {
		return 0, false
	}
	return vs[0], true
}

// samples reads every sample of the named metric (each label set) from a
// daemon's /metrics; none when it cannot.
func samples(ctx context.Context, addr, name string) []float64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var vs []float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue // another metric whose name starts the same
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			vs = append(vs, v)
		}
	}
	return vs
}
