package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"stashd/internal/service"
)

// instance is one daemon of the run (`serve`), with its own data
// directory (its accounts' TDLib directories: a fresh login per instance)
// and metrics address, on the run's one database and world.
type instance struct {
	n       int    // 1-based
	dataDir string // data_dir of the instance
	logPath string
	metrics string // its metrics address

	// p is the running process; guarded by harness.mu.
	p *proc
}

// newInstances lays out o.Instances instances in dir. One instance keeps
// the layout of a single-daemon run (serve/, daemon.log); several get
// serve-N/ and daemon-N.log each, with every account's TDLib directory
// created, as `stashd sim --config-out` creates the first's: the simulator
// logs an account in by its directory's name, so each instance's directory
// is a fresh login of the same user.
func newInstances(dir string, n int, accounts []string) ([]*instance, error) {
	out := make([]*instance, n)
	for i := range out {
		in := &instance{n: i + 1, dataDir: filepath.Join(dir, "serve"), logPath: filepath.Join(dir, "daemon.log")}
		if n > 1 {
			in.dataDir = filepath.Join(dir, "serve-"+strconv.Itoa(in.n))
			in.logPath = filepath.Join(dir, "daemon-"+strconv.Itoa(in.n)+".log")
		}
		for _, a := range accounts {
			if err := os.MkdirAll(filepath.Join(in.dataDir, "accounts", a, "database"), 0o700); err != nil {
				return nil, fmt.Errorf("create instance %d's account directory: %w", in.n, err)
			}
		}
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		in.metrics = addr
		out[i] = in
	}
	return out, nil
}

// process returns the instance's running process, nil when none runs.
func (h *harness) process(in *instance) *proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	if in.p == nil || exited(in.p) {
		return nil
	}
	return in.p
}

// supervise keeps the instance's daemon running until ctx ends, then
// stops it with SIGTERM (its graceful drain).
func (h *harness) supervise(ctx context.Context, in *instance) {
	for ctx.Err() == nil {
		p, err := start(h.o.Daemon, []string{"serve", "--config", h.config}, h.daemonEnv(in), in.logPath, nil)
		if err != nil {
			h.log.Error("start the daemon", "instance", in.n, "err", err)
			service.Sleep(ctx, time.Second)
			continue
		}
		h.mu.Lock()
		in.p = p
		h.mu.Unlock()
		select {
		case <-p.exited:
		case <-ctx.Done():
			// A paused daemon would never drain.
			p.signal(syscall.SIGCONT)
			p.signal(syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(20 * time.Second):
				h.log.Error("the daemon did not stop on SIGTERM; killing it", "instance", in.n)
				p.signal(syscall.SIGKILL)
				<-p.exited
			}
			return
		}
		h.mu.Lock()
		killed := h.killed[p]
		delete(h.killed, p)
		if !killed {
			h.exits++
		}
		h.mu.Unlock()
		if !killed {
			h.log.Warn("the daemon exited; restarting it", "instance", in.n, "status", p.err)
		}
		service.Sleep(ctx, restartDelay)
	}
}

// waitUp waits until every daemon runs and answers /healthz (the process
// is up, possibly still starting its accounts, or a standby).
func (h *harness) waitUp(ctx context.Context) error { return h.waitFor(ctx, "/healthz") }

// waitReady waits until every daemon answers /readyz: its database is up
// and every account it runs connected (a standby runs none).
func (h *harness) waitReady(ctx context.Context) error { return h.waitFor(ctx, "/readyz") }

func (h *harness) waitFor(ctx context.Context, path string) error {
	for _, in := range h.instances {
		if err := h.waitInstance(ctx, in, path); err != nil {
			return err
		}
	}
	return nil
}

func (h *harness) waitInstance(ctx context.Context, in *instance, path string) error {
	deadline := time.Now().Add(2 * time.Minute)
	client := http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		if h.process(in) != nil {
			resp, err := client.Get("http://" + in.metrics + path)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
		if !service.Sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("chaos: daemon %d has not answered %s for 2 minutes (see %s)", in.n, path, filepath.Base(in.logPath))
}

// standbyEvery makes every standbyEvery-th kill of a run with several
// instances strike an instance that owns no account (a standby), and the
// others an account's owner, so that most kills cause a failover.
const standbyEvery = 5

// target chooses the instance the i-th kill strikes: with one instance,
// that one; with several, the owner of an account (chosen at random among
// the owned ones), but every standbyEvery-th kill an instance that owns
// none. When no instance fits (no lease live), one at random. owns
// reports whether the target owned an account.
func (h *harness) target(ctx context.Context, i int) (in *instance, owns bool) {
	if len(h.instances) == 1 {
		return h.instances[0], h.ownsAny(ctx, h.instances[0])
	}
	owners := h.owners(ctx)
	if (i+1)%standbyEvery == 0 {
		var standbys []*instance
		for _, in := range h.instances {
			if owners[in] == 0 {
				standbys = append(standbys, in)
			}
		}
		if len(standbys) > 0 {
			return standbys[h.rng.IntN(len(standbys))], false
		}
	}
	return h.owner(ctx)
}

// owner returns the owner of an account chosen at random, or a random
// instance when no account has a live owner among the run's processes.
func (h *harness) owner(ctx context.Context) (*instance, bool) {
	live, pids, err := liveOwners(ctx, h.db)
	if err == nil && len(live) > 0 {
		// Shuffled, so that a dead owner's account does not always win.
		for _, k := range h.rng.Perm(len(live)) {
			if in := h.byPID(pids[live[k].account]); in != nil {
				return in, true
			}
		}
	}
	return h.instances[h.rng.IntN(len(h.instances))], false
}

// owners counts the accounts each instance owns.
func (h *harness) owners(ctx context.Context) map[*instance]int {
	out := make(map[*instance]int)
	live, pids, err := liveOwners(ctx, h.db)
	if err != nil {
		return out
	}
	for _, r := range live {
		if in := h.byPID(pids[r.account]); in != nil {
			out[in]++
		}
	}
	return out
}

func (h *harness) ownsAny(ctx context.Context, in *instance) bool { return h.owners(ctx)[in] > 0 }

// byPID returns the instance whose running process has pid.
func (h *harness) byPID(pid int) *instance {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, in := range h.instances {
		if in.p != nil && !exited(in.p) && in.p.pid() == pid {
			return in
		}
	}
	return nil
}

// pause SIGSTOPs an account's owner (a random instance when no account
// has a live owner) for 1.5 to 2.5 lease TTLs, then SIGCONTs it: its lease
// lapses meanwhile, another instance takes the account over, and the
// woken owner must not touch it again. However the wait ends, the process
// is continued.
func (h *harness) pause(ctx context.Context) error {
	if err := h.waitReady(ctx); err != nil {
		return err
	}
	in, owns := h.owner(ctx)
	p := h.process(in)
	if p == nil {
		return nil // it died meanwhile; the supervisor restarts it
	}
	hold := time.Duration((1.5 + h.rng.Float64()) * float64(h.leaseTTL))
	h.mu.Lock()
	h.struck[p.pid()] = true
	h.mu.Unlock()
	h.obs.strike(p)
	frozen := time.Now()
	p.signal(syscall.SIGSTOP)
	h.mu.Lock()
	h.rep.Pauses++
	h.mu.Unlock()
	h.log.Info("daemon paused", "instance", in.n, "pause", h.rep.Pauses, "of", h.o.Pauses, "owner", owns, "for", hold.Round(time.Millisecond).String())
	select {
	case <-time.After(hold):
	case <-p.exited:
	case <-ctx.Done():
	}
	// Noted before the continue: a request in flight may reach the
	// world at once.
	h.mu.Lock()
	h.freezes = append(h.freezes, freeze{dataDir: in.dataDir, from: frozen, to: time.Now()})
	h.mu.Unlock()
	p.signal(syscall.SIGCONT)
	h.log.Info("daemon continued", "instance", in.n)
	return ctx.Err()
}
