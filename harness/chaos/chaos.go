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
)

// Options configure a chaos run. Zero values take the defaults in
// brackets.
type Options struct {
	// Kills is how many times a daemon is SIGKILLed; zero never. With
	// several instances a kill strikes an account's owner, but every
	// fifth a standby.
	Kills int
	// Instances is how many daemons run on the one database and world [1].
	Instances int
	// Pauses is how many times an account's owner is SIGSTOPped for 1.5 to
	// 2.5 lease TTLs, then SIGCONTed; spread over the kills [none].
	Pauses int
	// LeaseTTL is the daemons' account lease TTL (STASHD_LEASE_TTL)
	// [3 s with several instances; with one, the daemon's own default].
	LeaseTTL time.Duration
	// LockTTL is the daemons' package lock TTL (STASHD_LOCK_TTL) [the
	// daemon's own default]: a killed daemon's locks hold their packages
	// that long, which bounds how soon a run can settle.
	LockTTL time.Duration
	// PGKills is how many times the PostgreSQL postmaster is SIGKILLed,
	// spread over the daemon kills; zero never.
	PGKills int
	// PGStandby runs the database as a primary and a streaming standby,
	// StandbySync or StandbyAsync; "" runs one server.
	PGStandby string
	// PGFailovers is how many times the primary is SIGKILLed and the
	// standby promoted (a new standby is then copied from it); it needs
	// PGStandby.
	PGFailovers int
	// SendRate is the daemons' send budget per account, messages a minute
	// (STASHD_SEND_RATE) [6000: the simulated world has no send limit].
	// At Telegram's own budget (20) a busy world's deliveries back up.
	SendRate float64
	// Audit is what the audit requires of every published package:
	// AuditFull (catalogued and delivered everywhere its routes say) or
	// AuditCatalogue (catalogued; its deliveries may still wait, but
	// none may be made twice) [AuditFull].
	Audit string
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
	// DifferenceDelay is how long a simulated session takes to fetch a
	// chat's difference (after openChat, after a reconnect): sessions
	// read the chat as their database last knew it meanwhile. Zero: the
	// simulator's default.
	DifferenceDelay time.Duration
	// ServerView makes the world answer every request from the server's
	// truth; false (the default) gives each TDLib database its own local
	// view, as TDLib answers some requests locally.
	ServerView bool
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

// Audit modes (Options.Audit).
const (
	AuditFull      = "full"
	AuditCatalogue = "catalogue"
)

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
	// PGFailovers counts the primaries killed and standbys promoted;
	// PGStandby is the standby's mode ("" without one).
	PGFailovers int    `json:"pg_failovers"`
	PGStandby   string `json:"pg_standby,omitempty"`
	// DeliveriesRecovered counts the delivery records the daemons rebuilt
	// from the destinations after the catalogue rewound.
	DeliveriesRecovered int64 `json:"deliveries_recovered"`
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
	SessionOverlaps int `json:"session_overlaps"`
	// InFlightAtFreeze counts the requests a paused daemon had in flight
	// at its SIGSTOP, which reached the world right after its SIGCONT,
	// once another instance ran the account (freeze.go): no overlap of
	// stashd's making.
	InFlightAtFreeze int `json:"in_flight_at_freeze"`
	// LocalView: the world's TDLib sessions answered local-capable
	// requests from their own message databases, as TDLib does.
	LocalView bool `json:"local_view"`
	// SelfLeaseLosses counts the times a daemon lost an account's lease
	// with no kill or pause of it, and no postmaster kill, behind the
	// loss: a daemon that fenced itself.
	SelfLeaseLosses int `json:"self_lease_losses"`
	// NotReadySeconds is the time daemons answered /readyz with anything
	// but 200 after they had first been ready (the harness's kills and
	// pauses aside: a process struck by one is not judged again).
	NotReadySeconds float64 `json:"not_ready_seconds"`
	// CatalogueLagP99Seconds is the 99th percentile of the time from a
	// package's publication (its last part) to its catalogue row.
	CatalogueLagP99Seconds float64 `json:"catalogue_lag_p99_seconds"`
	// DeliveryBacklogEnd counts the (package, destination) deliveries
	// still waiting when the run ended (with AuditCatalogue).
	DeliveryBacklogEnd int `json:"delivery_backlog_end"`
	// Processes holds every daemon process's resources, sampled every 5 s
	// after a minute's warm-up.
	Processes      []Resources `json:"processes"`
	AuditMode      string      `json:"audit_mode"`
	SendRate       float64     `json:"send_rate"`
	SettleSeconds  float64     `json:"settle_seconds"`
	ElapsedSeconds float64     `json:"elapsed_seconds"`
	Settled        bool        `json:"settled"`
	OK             bool        `json:"ok"`
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
	o      Options
	log    *slog.Logger
	rng    *rand.Rand
	sock   string
	config string
	pgCfg  pgembed.Config // the primary's
	pgURL  string
	// standbyCfg is the standby's, with Options.PGStandby.
	standbyCfg pgembed.Config
	// pgOps serialises what stops and starts clusters (postmaster kills,
	// failovers).
	pgOps     sync.Mutex
	instances []*instance
	// leaseTTL is the TTL in effect: Options.LeaseTTL, or the daemon's
	// default when the harness leaves it alone.
	leaseTTL time.Duration
	leases   *leaseWatch
	obs      *observer

	mu      sync.Mutex
	pg      *pgembed.Cluster // the primary
	standby *pgembed.Cluster
	killed  map[*proc]bool
	exits   int
	rep     Report
	// struck holds the process ids the harness killed or paused, and
	// pgKilled the times it killed the postmaster: what explains a
	// daemon losing a lease.
	struck   map[int]bool
	pgKilled []time.Time
	// freezes are the pauses of daemons, for excuseFrozen.
	freezes []freeze

	db *pgxpool.Pool
}

// daemonLeaseTTL is the daemon's default lease TTL (lease_ttl), reported
// when a run leaves it alone.
const daemonLeaseTTL = 30 * time.Second

// Run runs one chaos run. An error means the run could not be carried out;
// a failed audit is a Report with OK false.
func Run(ctx context.Context, o Options) (Report, error) {
	o.SendRate = cmp.Or(o.SendRate, 6000)
	o.Audit = cmp.Or(o.Audit, AuditFull)
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
	if o.PGFailovers > 0 && o.PGStandby != StandbySync && o.PGStandby != StandbyAsync {
		return Report{}, fmt.Errorf("chaos: %d failovers need a standby (%q or %q)", o.PGFailovers, StandbySync, StandbyAsync)
	}
	if o.Audit != AuditFull && o.Audit != AuditCatalogue {
		return Report{}, fmt.Errorf("chaos: audit %q: want %q or %q", o.Audit, AuditFull, AuditCatalogue)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	started := time.Now()
	h := &harness{o: o, log: log, killed: map[*proc]bool{}, leases: newLeaseWatch(), obs: newObserver(),
		struck:   map[int]bool{},
		leaseTTL: cmp.Or(o.LeaseTTL, daemonLeaseTTL),
		rng:      rand.New(rand.NewPCG(uint64(o.Seed), 0x6b696c6c))} // "kill"
	h.rep.Seed, h.rep.Instances, h.rep.LeaseTTLSeconds = o.Seed, o.Instances, h.leaseTTL.Seconds()
	h.rep.AuditMode, h.rep.SendRate, h.rep.PGStandby = o.Audit, o.SendRate, o.PGStandby
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

	if err := h.startPostgres(ctx, dir); err != nil {
		return Report{}, err
	}
	defer h.stopPostgres()
	h.db, err = pgxpool.New(ctx, h.pgURL)
	if err != nil {
		return Report{}, fmt.Errorf("connect to the cluster: %w", err)
	}
	defer h.db.Close()

	sim, world, published, err := h.startSim(ctx, dir)
	if err != nil {
		return Report{}, err
	}
	h.rep.LocalView = world.LocalView
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
	if f, err := os.Create(filepath.Join(dir, "resources.csv")); err == nil {
		fmt.Fprintln(f, "seconds,instance,pid,rss_mb,goroutines,open_fds")
		h.obs.csv = f
		defer f.Close()
	}
	watch.Go(func() { h.obs.run(wctx, h) })
	defer func() {
		stopWatch()
		watch.Wait()
	}()

	fctx, stopFailovers := context.WithCancel(ctx)
	defer stopFailovers()
	failed := make(chan error, 1)
	go func() { failed <- h.failovers(fctx) }()
	if err := h.kill(ctx); err != nil {
		return h.rep, err
	}
	if err := <-failed; err != nil {
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
	h.rep.SelfLeaseLosses = h.selfLosses(h.leases.lost())
	notReady, procs := h.obs.result()
	h.rep.NotReadySeconds, h.rep.Processes = notReady.Seconds(), procs
	h.rep.CatalogueLagP99Seconds = rep.CatalogueLagP99Seconds
	h.rep.DeliveryBacklogEnd = rep.DeliveryBacklog
	h.rep.DeliveriesRecovered = rep.DeliveriesRecovered
	h.rep.SessionOverlaps = rep.SessionOverlaps
	h.rep.DaemonExits = h.exits
	h.rep.Audit = rep
	h.rep.Settled = rep.Settled
	h.rep.PublishedArchives, h.rep.UniquePackages = rep.PublishedArchives, rep.UniquePackages
	h.rep.Missing, h.rep.DuplicateDeliveries, h.rep.DeadLetters = rep.Missing, rep.DuplicateDeliveries, rep.DeadLetters
	h.rep.OK = rep.OK() && h.rep.Kills >= h.o.Kills && h.rep.PGKills >= h.o.PGKills && h.rep.Pauses >= h.o.Pauses &&
		h.rep.PGFailovers >= h.o.PGFailovers &&
		(h.o.Instances == 1 || ownerless <= 2*h.leaseTTL)
	return h.rep, nil
}

// selfLosses counts the lease losses nothing the harness did explains:
// the owner was neither killed nor paused, and no postmaster kill came
// within two lease TTLs (and a second) before the loss.
func (h *harness) selfLosses(losses []leaseLoss) int {
	n := 0
	for _, l := range losses {
		pid, _ := ownerPID(l.owner)
		explained := h.struck[pid]
		for _, at := range h.pgKilled {
			// The loss is read by the database's clock, the kill by the
			// harness's: on one machine they agree to well within the slack.
			if !at.After(l.at) && l.at.Sub(at) <= 2*h.leaseTTL+time.Second {
				explained = true
			}
		}
		if !explained {
			n++
			h.log.Warn("a daemon lost an account's lease by itself", "account", l.account, "owner", l.owner, "at", l.at)
		}
	}
	return n
}

// simWorld is the part of `stashd sim`'s first line the harness reads.
type simWorld struct {
	AuditURL  string   `json:"audit_url"`
	Accounts  []string `json:"accounts"`
	LocalView bool     `json:"local_view"`
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
		"--audit-addr", "127.0.0.1:0",
		"--config-out", h.config, "--serve-dir", filepath.Join(dir, "serve"),
	}
	if h.o.ServerView {
		args = append(args, "--server-view")
	}
	if h.o.DifferenceDelay > 0 {
		args = append(args, "--difference-delay", h.o.DifferenceDelay.String())
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
		"STASHD_SEND_RATE=" + strconv.FormatFloat(h.o.SendRate, 'g', -1, 64),
		"STASHD_SEND_IN_FLIGHT=8",
	}
	if h.o.LeaseTTL > 0 {
		env = append(env, "STASHD_LEASE_TTL="+h.o.LeaseTTL.String())
	}
	if h.o.LockTTL > 0 {
		env = append(env, "STASHD_LOCK_TTL="+h.o.LockTTL.String())
	}
	if h.o.LibDir != "" {
		env = append(env, "LD_LIBRARY_PATH="+h.o.LibDir)
	}
	return env
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
