package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/internal/pgembed"
)

// cpuMeter reads the CPU time (user and system) this process and the
// PostgreSQL server have spent, to tell where an ingest run's cores went.
// The server's share is read from /proc when it runs on this machine (its
// postmaster.pid is readable); otherwise only this process's is known.
type cpuMeter struct {
	postmaster int // 0: the server's CPU is not known
}

// cpuSample is the CPU time spent up to one moment.
type cpuSample struct {
	self, server time.Duration
}

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// newCPUMeter finds the server's postmaster through its data directory.
func (r *runner) newCPUMeter(ctx context.Context) *cpuMeter {
	m := &cpuMeter{}
	conn, err := pgx.Connect(ctx, r.o.ServerURL)
	if err != nil {
		return m
	}
	defer conn.Close(ctx)
	var dir string
	if err := conn.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dir); err != nil {
		return m
	}
	pid, ok := pgembed.PostmasterPID(dir)
	if !ok {
		return m
	}
	if _, err := procTimes(pid); err == nil {
		m.postmaster = pid
	}
	return m
}

// sample reads the CPU time spent so far.
func (m *cpuMeter) sample() cpuSample {
	var s cpuSample
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if m.postmaster != 0 {
		s.server = m.serverTime()
	}
	return s
}

// serverTime is the postmaster's CPU time, with its children's: those
// running (each backend and worker) and those that ended (which the
// postmaster waited for). A child that ends while this reads may be
// counted twice or not at all: a few ticks at most.
func (m *cpuMeter) serverTime() time.Duration {
	var total time.Duration
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == m.postmaster {
			continue
		}
		t, err := procTimes(pid)
		if err == nil && t.ppid == m.postmaster {
			total += t.own
		}
	}
	if t, err := procTimes(m.postmaster); err == nil {
		total += t.own + t.children
	}
	return total
}

// procStat is what serverTime reads of /proc/<pid>/stat.
type procStat struct {
	ppid          int
	own, children time.Duration
}

func procTimes(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted here follow its closing parenthesis.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is the state (field 3): ppid is field 4, utime..cstime 14..17.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	n := make([]int64, 0, 5)
	for _, k := range []int{1, 11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		n = append(n, v)
	}
	return procStat{ppid: int(n[0]), own: time.Duration(n[1]+n[2]) * clockTick, children: time.Duration(n[3]+n[4]) * clockTick}, nil
}

// cpuUse is the CPU a run spent per package: total milliseconds, and
// text saying where they went.
type cpuUse struct {
	total float64
	text  string
}

// cpuPerPackage describes the CPU spent between two samples over n
// packages, in milliseconds a package, with the share of the machine's
// cores it used over wall.
func (m *cpuMeter) cpuPerPackage(from, to cpuSample, n int, wall time.Duration, selfName string) cpuUse {
	per := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(n) }
	self := per(to.self - from.self)
	if m.postmaster == 0 {
		return cpuUse{self, fmt.Sprintf("%s %.2f ms (the server's CPU is not readable here)", selfName, self)}
	}
	server := per(to.server - from.server)
	busy := (to.self - from.self + to.server - from.server).Seconds() / wall.Seconds()
	return cpuUse{self + server, fmt.Sprintf("PostgreSQL %.2f ms + %s %.2f ms = %.2f ms a package; %.2f of %d cores busy",
		server, selfName, self, server+self, busy, runtime.NumCPU())}
}
