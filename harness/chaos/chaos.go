// Package chaos runs stashd as real processes and kills them: `stashd sim`
// serves a simulated Telegram world, a private PostgreSQL cluster holds the
// catalogue, and the daemon (a stashd binary linked against the stand-in
// libtdjson, run as `serve`) mirrors the world while the harness SIGKILLs
// it at random moments (seeded), some chosen mid-download, mid-send and
// mid-transaction, and now and then SIGKILLs the PostgreSQL postmaster
// too. Like systemd, the harness restarts whatever died. When publishing
// has ended it lets the pipeline settle and audits the catalogue and the
// destinations against the world's ground truth (package audit): nothing
// missing, nothing delivered twice, no account ever run by two sessions at
// once.
//
// With several instances (Options.Instances) the daemons share the
// database and the world, each with its own TDLib directories; the kills
// strike accounts' owners (read from the accounts' leases) and pauses
// SIGSTOP them past their lease, so that accounts fail over; the harness
// reads the leases throughout and reports the failovers and the longest
// time an account had no owner.
package chaos

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"stashd/harness/audit"
	"stashd/internal/pgembed"
	"stashd/internal/service"
	"stashd/store"
)

// Options configure a chaos run. Zero values take the defaults in
// brackets.
type Options struct {
	// Kills is how many times a daemon is SIGKILLed [50]. With several
	// instances a kill strikes an account's owner, but every fifth a
	// standby.
	Kills int
	// Instances is how many daemons run on the one database and world [1].
	Instances int
	// Pauses is how many times an account's owner is SIGSTOPped for 1.5 to
	// 2.5 lease TTLs, then SIGCONTed; spread over the kills [none].
	Pauses int
	// LeaseTTL is the daemons' account lease TTL (STASHD_LEASE_TTL)
	// [3 s with several instances; with one, the daemon's own default].
	LeaseTTL time.Duration
	// PGKills is how many times the PostgreSQL postmaster is SIGKILLed,
	// spread over the daemon kills [5].
	PGKills int
	// Seed of the world and of the harness's choices.
	Seed int64
	// Duration of publishing [45 s]; the kills go on after it until all
	// are done.
	Duration time.Duration
	// Rate of publication, items per second [8].
	Rate float64
	// Sources [4], Accounts [2], ForumTopics [0] of the world.
	Sources, Accounts, ForumTopics int
	// DropUpdates is the probability that a new-message update is lost.
	DropUpdates float64
	// DisconnectEvery takes every account offline this often, for a
	// quarter of the period; zero never.
	DisconnectEvery time.Duration
	// Dir is the run's working directory; it is emptied first. Required.
	Dir string
	// Stashd is the stashd binary that serves the world (`stashd sim`).
	// Required.
	Stashd string
	// Daemon is the binary run as the daemon (`serve`): stashd linked
	// against the stand-in libtdjson. Required.
	Daemon string
	// LibDir, when set, is put on the daemon's LD_LIBRARY_PATH (where the
	// stand-in libtdjson.so is, for a daemon binary built against TDLib).
	LibDir string
	// SettleTimeout bounds the wait for the audit to pass after publishing
	// and the kills have ended [3 min].
	SettleTimeout time.Duration
	// Logger receives the run's events; nil discards them.
	Logger *slog.Logger
}

// Report is the outcome of a run.
type Report struct {
	Seed  int64 `json:"seed"`
	Kills int   `json:"kills"`
	// The kills that caught the daemon with a download in flight, a
	// delivery intent not yet sent, or a transaction open.
	KillsMidDownload    int `json:"kills_mid_download"`
	KillsMidSend        int `json:"kills_mid_send"`
	KillsMidTransaction int `json:"kills_mid_transaction"`
	PGKills             int `json:"pg_kills"`
	// DaemonExits counts the daemon's exits the harness did not cause
	// (it gave up, e.g. with its database gone); each was restarted.
	DaemonExits         int `json:"daemon_exits"`
	PublishedArchives   int `json:"published_archives"`
	UniquePackages      int `json:"unique_packages"`
	Missing             int `json:"missing"`
	DuplicateDeliveries int `json:"duplicate_deliveries"`
	DeadLetters         int `json:"dead_letters"`
	// PendingWork counts, at the end, set parts waiting for their set and
	// dead letters due again (an incomplete set's aside).
	PendingWork int `json:"pending_work"`
	// Instances ran on the one database; Pauses counts the SIGSTOPs of an
	// owner, each held past LeaseTTLSeconds.
	Instances       int     `json:"instances"`
	Pauses          int     `json:"pauses"`
	LeaseTTLSeconds float64 `json:"lease_ttl_seconds"`
	// KillsOfOwners counts the kills that struck an account's owner.
	KillsOfOwners int `json:"kills_of_owners"`
	// Failovers counts the changes of an account's owner (owner, nobody,
	// other owner counts once); LongestOwnerlessSeconds is the longest
	// time an account had no owner with a live lease, after its first,
	// by the database's clock, from readings every 75 ms.
	Failovers               int     `json:"failovers"`
	LongestOwnerlessSeconds float64 `json:"longest_ownerless_seconds"`
	// SessionOverlaps counts requests the world saw from an older session
	// of an account after a newer one had made its own.
	SessionOverlaps int     `json:"session_overlaps"`
	SettleSeconds   float64 `json:"settle_seconds"`
	ElapsedSeconds  float64 `json:"elapsed_seconds"`
	Settled         bool    `json:"settled"`
	OK              bool    `json:"ok"`
	// Audit is the whole audit, names of what is missing included.
	Audit audit.Report `json:"audit"`
}

// Kinds of kill moments, tried in turn.
const (
	momentAny = iota
	momentDownload
	momentSend
	momentTransaction
	moments
)

// momentWait is how long a kill waits for its moment before it strikes
// anyway.
const momentWait = 2 * time.Second

type harness struct {
	o         Options
	log       *slog.Logger
	rng       *rand.Rand
	sock      string
	config    string
	pgCfg     pgembed.Config
	pgURL     string
	instances []*instance
	// leaseTTL is the TTL in effect: Options.LeaseTTL, or the daemon's
	// default when the harness leaves it alone.
	leaseTTL time.Duration
	leases   *leaseWatch

	mu     sync.Mutex
	pg     *pgembed.Cluster
	killed map[*proc]bool
	exits  int
	rep    Report

	db *pgxpool.Pool
}

// daemonLeaseTTL is the daemon's default lease TTL (lease_ttl), reported
// when a run leaves it alone.
const daemonLeaseTTL = 30 * time.Second

// Run runs one chaos run. An error means the run could not be carried out;
// a failed audit is a Report with OK false.
func Run(ctx context.Context, o Options) (Report, error) {
	o.Kills = cmp.Or(o.Kills, 50)
	o.PGKills = cmp.Or(o.PGKills, 5)
	o.Duration = cmp.Or(o.Duration, 45*time.Second)
	o.Rate = cmp.Or(o.Rate, 8)
	o.Sources = cmp.Or(o.Sources, 4)
	o.Accounts = cmp.Or(o.Accounts, 2)
	o.SettleTimeout = cmp.Or(o.SettleTimeout, 3*time.Minute)
	o.Instances = cmp.Or(o.Instances, 1)
	if o.Instances > 1 {
		o.LeaseTTL = cmp.Or(o.LeaseTTL, 3*time.Second)
	}
	if o.Dir == "" || o.Stashd == "" || o.Daemon == "" {
		return Report{}, errors.New("chaos: Dir, Stashd and Daemon are required")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	started := time.Now()
	h := &harness{o: o, log: log, killed: map[*proc]bool{}, leases: newLeaseWatch(),
		leaseTTL: cmp.Or(o.LeaseTTL, daemonLeaseTTL),
		rng:      rand.New(rand.NewPCG(uint64(o.Seed), 0x6b696c6c))} // "kill"
	h.rep.Seed, h.rep.Instances, h.rep.LeaseTTLSeconds = o.Seed, o.Instances, h.leaseTTL.Seconds()
	rep, err := h.run(ctx)
	rep.ElapsedSeconds = time.Since(started).Seconds()
	return rep, err
}

func (h *harness) run(ctx context.Context) (Report, error) {
	dir, err := filepath.Abs(h.o.Dir)
	if err != nil {
		return Report{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return Report{}, fmt.Errorf("empty %s: %w", dir, err)
	}
	// Traversable: as root, PostgreSQL runs as the postgres user and must
	// reach its cluster directory inside (which pgembed keeps 0700).
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Report{}, err
	}
	// A unix socket path holds at most 107 bytes: keep it relative when
	// the absolute one is too long.
	h.sock = filepath.Join(dir, "tdjson.sock")
	if len(h.sock) > 100 {
		if h.sock, err = filepath.Rel(".", h.sock); err != nil || len(h.sock) > 100 {
			return Report{}, fmt.Errorf("chaos: %s is too long a path for the simulator's socket", dir)
		}
	}
	h.config = filepath.Join(dir, "serve.toml")

	// PostgreSQL's durable defaults, as a deployment runs it: with
	// synchronous_commit off, a server crash loses the last commits, a
	// delivery intent among them, and its send would be made twice.
	h.pgCfg = pgembed.Config{Dir: filepath.Join(dir, "postgres"), Logger: h.log}
	pg, err := pgembed.Start(ctx, h.pgCfg)
	if err != nil {
		return Report{}, err
	}
	h.pg, h.pgURL = pg, pg.URL("")
	defer func() {
		h.mu.Lock()
		pg := h.pg
		h.mu.Unlock()
		_ = pg.Stop()
	}()
	h.db, err = pgxpool.New(ctx, h.pgURL)
	if err != nil {
		return Report{}, fmt.Errorf("connect to the cluster: %w", err)
	}
	defer h.db.Close()

	sim, world, published, err := h.startSim(ctx, dir)
	if err != nil {
		return Report{}, err
	}
	defer func() {
		sim.signal(syscall.SIGTERM)
		select {
		case <-sim.exited:
		case <-time.After(10 * time.Second):
			sim.signal(syscall.SIGKILL)
			<-sim.exited
		}
	}()
	h.log.Info("world served", "socket", h.sock, "audit", world.AuditURL)

	if h.instances, err = newInstances(dir, h.o.Instances, world.Accounts); err != nil {
		return Report{}, err
	}
	dctx, stopDaemons := context.WithCancel(ctx)
	var daemons sync.WaitGroup
	for _, in := range h.instances {
		daemons.Go(func() { h.supervise(dctx, in) })
	}
	defer func() {
		stopDaemons()
		daemons.Wait()
	}()
	// The leases are read until the audit is done, before the daemons
	// stop (and release them).
	wctx, stopWatch := context.WithCancel(ctx)
	var watch sync.WaitGroup
	watch.Go(func() { h.leases.run(wctx, h.db) })
	defer func() {
		stopWatch()
		watch.Wait()
	}()

	if err := h.kill(ctx); err != nil {
		return h.rep, err
	}
	select {
	case <-published:
	case <-sim.exited:
		return h.rep, fmt.Errorf("stashd sim exited: %v (see %s)", sim.err, filepath.Join(dir, "sim.log"))
	case <-ctx.Done():
		return h.rep, ctx.Err()
	}
	h.log.Info("publishing and killing done; settling")
	if err := h.waitUp(ctx); err != nil {
		return h.rep, err
	}
	settleStart := time.Now()
	rep, err := h.settle(ctx, world.AuditURL)
	h.rep.SettleSeconds = time.Since(settleStart).Seconds()
	stopWatch()
	watch.Wait()
	failovers, ownerless := h.leases.result()
	if err != nil {
		return h.rep, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !rep.OK() {
		// Goroutine dumps into the daemons' logs, for whoever reads why.
		for _, in := range h.instances {
			if in.p != nil && !exited(in.p) {
				in.p.signal(syscall.SIGQUIT)
			}
		}
	}
	h.rep.Failovers, h.rep.LongestOwnerlessSeconds = failovers, ownerless.Seconds()
	h.rep.SessionOverlaps = rep.SessionOverlaps
	h.rep.DaemonExits = h.exits
	h.rep.Audit = rep
	h.rep.Settled = rep.Settled
	h.rep.PublishedArchives, h.rep.UniquePackages = rep.PublishedArchives, rep.UniquePackages
	h.rep.Missing, h.rep.DuplicateDeliveries, h.rep.DeadLetters = rep.Missing, rep.DuplicateDeliveries, rep.DeadLetters
	h.rep.OK = rep.OK() && h.rep.Kills >= h.o.Kills && h.rep.PGKills >= h.o.PGKills && h.rep.Pauses >= h.o.Pauses &&
		(h.o.Instances == 1 || ownerless <= 2*h.leaseTTL)
	return h.rep, nil
}

// simWorld is the part of `stashd sim`'s first line the harness reads.
type simWorld struct {
	AuditURL string   `json:"audit_url"`
	Accounts []string `json:"accounts"`
}

// startSim starts `stashd sim` and returns once it serves, with the world
// it describes and a channel closed when publishing has ended.
func (h *harness) startSim(ctx context.Context, dir string) (*proc, simWorld, <-chan struct{}, error) {
	args := []string{"sim",
		"--socket", h.sock, "--seed", strconv.FormatInt(h.o.Seed, 10),
		"--duration", h.o.Duration.String(), "--rate", strconv.FormatFloat(h.o.Rate, 'g', -1, 64),
		"--sources", strconv.Itoa(h.o.Sources), "--accounts", strconv.Itoa(h.o.Accounts),
		"--forum-topics", strconv.Itoa(h.o.ForumTopics),
		"--drop-updates", strconv.FormatFloat(h.o.DropUpdates, 'g', -1, 64),
		"--disconnect-every", h.o.DisconnectEvery.String(),
		"--files-dir", filepath.Join(dir, "files"), "--audit-addr", "127.0.0.1:0",
		"--config-out", h.config, "--serve-dir", filepath.Join(dir, "serve"),
	}
	pr, pw := io.Pipe()
	sim, err := start(h.o.Stashd, args, nil, filepath.Join(dir, "sim.log"), pw)
	if err != nil {
		pw.Close()
		return nil, simWorld{}, nil, err
	}
	go func() {
		<-sim.exited
		pw.Close()
	}()
	lines := make(chan string, 2)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var w simWorld
	select {
	case line, ok := <-lines:
		if !ok {
			<-sim.exited
			return nil, w, nil, fmt.Errorf("stashd sim exited before serving: %v (see %s)", sim.err, filepath.Join(dir, "sim.log"))
		}
		if err := json.Unmarshal([]byte(line), &w); err != nil || w.AuditURL == "" {
			sim.signal(syscall.SIGKILL)
			return nil, w, nil, fmt.Errorf("stashd sim: unexpected first line %q", line)
		}
	case <-ctx.Done():
		sim.signal(syscall.SIGKILL)
		return nil, w, nil, ctx.Err()
	}
	published := make(chan struct{})
	go func() {
		defer close(published)
		for line := range lines {
			if strings.Contains(line, `"published"`) {
				return
			}
		}
	}()
	return sim, w, published, nil
}

// daemonEnv is an instance's environment: the world's socket, the
// harness's database, the instance's data directory and metrics address,
// and timings on the run's scale (production retries dead letters after a
// minute; here after half a second, doubling, so a run settles in
// minutes; the lease TTL is seconds).
func (h *harness) daemonEnv(in *instance) []string {
	env := []string{
		"STASHD_TDJSON_SOCKET=" + h.sock,
		"STASHD_DATABASE_URL=" + h.pgURL,
		"STASHD_DATA_DIR=" + in.dataDir,
		"STASHD_METRICS_ADDR=" + in.metrics,
		"STASHD_LOG_FORMAT=json",
		"STASHD_CATCHUP_INTERVAL=250ms",
		"STASHD_RETRY_INTERVAL=500ms",
		"STASHD_DEAD_LETTER_DELAY=500ms",
		"STASHD_DEAD_LETTER_ATTEMPTS=6",
		"STASHD_SET_SETTLE=300ms",
		"STASHD_SET_MAX_WAIT=3s",
		"STASHD_DRAIN_TIMEOUT=5s",
		"STASHD_SEND_TIMEOUT=30s",
		"STASHD_RESCAN_INTERVAL=10s",
		"STASHD_RESCAN_WINDOW=10m",
		// The simulated world has no send limit: pace sends at the most
		// the setting allows rather than Telegram's 20 a minute.
		"STASHD_SEND_RATE=6000",
		"STASHD_SEND_IN_FLIGHT=8",
	}
	if h.o.LeaseTTL > 0 {
		env = append(env, "STASHD_LEASE_TTL="+h.o.LeaseTTL.String())
	}
	if h.o.LibDir != "" {
		env = append(env, "LD_LIBRARY_PATH="+h.o.LibDir)
	}
	return env
}

// restartDelay is how long the harness waits before restarting a daemon
// that died, as systemd's RestartSec.
const restartDelay = 200 * time.Millisecond

// kill SIGKILLs a daemon o.Kills times, and pauses an owner o.Pauses times
// and SIGKILLs the postmaster o.PGKills times, both spread over the daemon
// kills. Each daemon kill waits for every daemon to be up, then a random
// time around the publishing duration's share, chooses its target (see
// target), then waits for its moment (a download, a send or a transaction
// in flight) at most momentWait.
func (h *harness) kill(ctx context.Context) error {
	mean := h.o.Duration / time.Duration(h.o.Kills)
	for i := range h.o.Kills {
		if h.rep.Pauses < h.o.Pauses && i >= (h.rep.Pauses+1)*h.o.Kills/(h.o.Pauses+1) {
			if err := h.pause(ctx); err != nil {
				return err
			}
		}
		if h.rep.PGKills < h.o.PGKills && i >= (h.rep.PGKills+1)*h.o.Kills/(h.o.PGKills+1) {
			// The database dies under a running daemon.
			if err := h.waitReady(ctx); err != nil {
				return err
			}
			if !service.Sleep(ctx, time.Duration(h.rng.Int64N(int64(2*mean)+1))) {
				return ctx.Err()
			}
			if err := h.killPostgres(ctx); err != nil {
				return err
			}
		}
		if err := h.waitUp(ctx); err != nil {
			return err
		}
		if !service.Sleep(ctx, time.Duration(h.rng.Int64N(int64(2*mean)+1))) {
			return ctx.Err()
		}
		in, owner := h.target(ctx, i)
		moment := i % moments
		caught := h.waitMoment(ctx, in, moment)
		h.mu.Lock()
		p := in.p
		if p == nil || exited(p) {
			h.mu.Unlock()
			continue // it died by itself meanwhile; the supervisor restarts it
		}
		h.killed[p] = true
		p.signal(syscall.SIGKILL)
		h.rep.Kills++
		if owner {
			h.rep.KillsOfOwners++
		}
		if caught {
			switch moment {
			case momentDownload:
				h.rep.KillsMidDownload++
			case momentSend:
				h.rep.KillsMidSend++
			case momentTransaction:
				h.rep.KillsMidTransaction++
			}
		}
		h.mu.Unlock()
		h.log.Info("daemon killed", "instance", in.n, "kill", h.rep.Kills, "of", h.o.Kills,
			"moment", momentName(moment, caught), "owner", owner)
		<-p.exited
	}
	for h.rep.Pauses < h.o.Pauses {
		if err := h.pause(ctx); err != nil {
			return err
		}
	}
	for h.rep.PGKills < h.o.PGKills {
		if err := h.killPostgres(ctx); err != nil {
			return err
		}
	}
	return nil
}

func momentName(m int, caught bool) string {
	if !caught {
		return "random"
	}
	return [...]string{"random", "mid-download", "mid-send", "mid-transaction"}[m]
}

// waitMoment polls, for at most momentWait, until in is in the middle of
// what moment names (a send or a transaction: any daemon, as the database
// shows them); it reports whether it was.
func (h *harness) waitMoment(ctx context.Context, in *instance, moment int) bool {
	if moment == momentAny {
		return false
	}
	deadline := time.Now().Add(momentWait)
	for time.Now().Before(deadline) {
		if h.inMoment(ctx, in, moment) {
			return true
		}
		if !service.Sleep(ctx, 5*time.Millisecond) {
			return false
		}
	}
	return false
}

func (h *harness) inMoment(ctx context.Context, in *instance, moment int) bool {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var yes bool
	switch moment {
	case momentDownload:
		return downloading(qctx, in)
	case momentSend:
		_ = h.db.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM deliveries WHERE state = 'intent')`).Scan(&yes)
	case momentTransaction:
		// A daemon session inside a transaction that writes (an advisory
		// lock wait is a transaction too, but holds nothing yet).
		_ = h.db.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'
			AND xact_start IS NOT NULL AND backend_xid IS NOT NULL)`).Scan(&yes)
	}
	return yes
}

// downloading reports whether in's metrics show downloaded bytes held (a
// download in flight or a package being hashed and listed).
func downloading(ctx context.Context, in *instance) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+in.metrics+"/metrics", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "stashd_download_bytes_in_flight") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil && v > 0 {
			return true
		}
	}
	return false
}

// killPostgres SIGKILLs the postmaster, leaves the database down a moment
// and starts it again on the same directory: PostgreSQL recovers from its
// write-ahead log.
func (h *harness) killPostgres(ctx context.Context) error {
	h.mu.Lock()
	pg := h.pg
	h.mu.Unlock()
	if err := syscall.Kill(pg.PID(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill the postmaster: %w", err)
	}
	<-pg.Done()
	h.rep.PGKills++
	h.log.Info("postmaster killed", "kill", h.rep.PGKills, "of", h.o.PGKills)
	if !service.Sleep(ctx, 200*time.Millisecond+time.Duration(h.rng.Int64N(int64(time.Second)))) {
		return ctx.Err()
	}
	pg, err := pgembed.Start(ctx, h.pgCfg)
	if err != nil {
		return fmt.Errorf("restart postgres after a kill: %w", err)
	}
	h.mu.Lock()
	h.pg = pg
	h.mu.Unlock()
	if pg.URL("") != h.pgURL {
		return fmt.Errorf("chaos: postgres came back at %s, not %s", pg.URL(""), h.pgURL)
	}
	return nil
}

// settleChecks is how many audits in a row must pass, with no work
// pending, before the run counts as settled.
const settleChecks = 3

// settle audits every second until the audit passes settleChecks times in
// a row with no work pending, or SettleTimeout passes; it returns the last
// audit.
func (h *harness) settle(ctx context.Context, auditURL string) (audit.Report, error) {
	st, err := store.Open(ctx, store.Config{URL: h.pgURL, MaxConns: 4})
	if err != nil {
		return audit.Report{}, err
	}
	defer st.Close()
	deadline := time.Now().Add(h.o.SettleTimeout)
	lastLog := time.Now()
	passed := 0
	var rep audit.Report
	for {
		truth, err := fetchTruth(ctx, auditURL)
		if err != nil {
			return rep, err
		}
		rep, err = audit.Check(ctx, st, truth)
		if err != nil {
			return rep, err
		}
		pending, err := pendingWork(ctx, st)
		if err != nil {
			return rep, err
		}
		rep.Settled = pending == 0
		h.mu.Lock()
		h.rep.PendingWork = pending
		h.mu.Unlock()
		// An overlap cannot be undone: settle on the rest, so that the
		// report says what else holds; the verdict still fails on it.
		rest := rep
		rest.SessionOverlaps = 0
		if rest.OK() {
			passed++
		} else {
			passed = 0
		}
		if passed >= settleChecks {
			return rep, nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			h.log.Info("settling", "missing", rep.Missing, "catalogued", rep.CataloguedPackages, "of", rep.UniquePackages,
				"delivered_twice", rep.DuplicateDeliveries, "pending_work", pending, "session_overlaps", rep.SessionOverlaps,
				"incomplete_sets_dead_lettered", rep.IncompleteDeadLettered, "of_incomplete", rep.IncompleteSets)
			lastLog = time.Now()
		}
		if time.Now().After(deadline) {
			rep.Settled = false
			return rep, nil
		}
		if !service.Sleep(ctx, time.Second) {
			return rep, ctx.Err()
		}
	}
}

// pendingWork counts set parts waiting for their set, dead letters the
// retry loop will take again (but an incomplete set's, which waits for a
// part that may never come) and queued deliveries (but those a route's
// window holds).
func pendingWork(ctx context.Context, st *store.Store) (int, error) {
	var n int
	err := st.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM source_messages WHERE outcome = 'part_pending') +
		(SELECT count(*) FROM dead_letters WHERE state = 'pending' AND next_attempt_at IS NOT NULL
			AND error_class <> 'incomplete_set') +
		(SELECT count(*) FROM waiting_deliveries WHERE route = '' OR opens_at <= now())`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count pending work: %w", err)
	}
	return n, nil
}

func fetchTruth(ctx context.Context, url string) (audit.Truth, error) {
	var t audit.Truth
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return t, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return t, fmt.Errorf("read the world's ground truth: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return t, fmt.Errorf("read the world's ground truth: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return t, fmt.Errorf("read the world's ground truth: %w", err)
	}
	return t, nil
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

func exited(p *proc) bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}
