package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/catchup"
	"stashd/ingest"
	"stashd/listener"
	"stashd/rescan"
	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// Dialer returns a started Telegram client for an account.
type Dialer func(ctx context.Context, account string) (tg.Client, error)

// Account is one Telegram account and the sources it watches.
type Account struct {
	Name string
	// Sources are watched chats by id.
	Sources []tg.ChatID
	// Named are watched chats by public username, resolved with
	// searchPublicChat when the account starts.
	Named []string
	// Topics limits forum sources to some topics (by chat id, or by
	// "@username" for named sources); a source not listed mirrors every
	// topic.
	Topics map[string][]int64
	// History says what a source catches up from when it is first added
	// (keyed like Topics); a source not listed catches up its whole
	// history.
	History map[string]History
}

// History is what a newly added source catches up from.
type History struct {
	// None: nothing posted before the source was added (its watermark
	// starts at its newest message).
	None bool
	// Since, when not zero, catches up only what was posted in this last
	// stretch of time (its watermark starts at the newest message older
	// than that).
	Since time.Duration
}

// PoolConns is the catalogue pool a daemon of this many accounts and
// workers each is opened with (store.Config.MaxConns): two connections a
// worker of each account, and 16 more. It bounds the statements in flight,
// not the work: nothing holds a connection while it waits.
func PoolConns(accounts, workers int) int32 { return int32(accounts*workers*2 + 16) }

// catchupInFlight is how many messages of a page catch-up handles at once
// for each of an account's workers. Most of them wait for their lock or
// their commit, which hold no download slot: the more wait together, the
// more each group commit holds and the less CPU a package costs (the
// ingest bench: 8 gave 0.85 of the raw transactions, 24 1.03, 32
// 1.06-1.12, 64 1.11). Each holds its message's lock, renewed every
// third of its TTL while it waits for a slot.
const catchupInFlight = 32

// maxCatchupInFlight bounds the messages in flight of an account's
// catch-up whatever its workers (up to 256): each is a goroutine and a
// lock, and past a few pages read ahead more of them fill no commit more.
const maxCatchupInFlight = 1024

// Config configures a Daemon. Zero durations and sizes take the documented
// defaults of the component they configure.
type Config struct {
	Accounts     []Account
	Destinations []tg.ChatID
	// DestinationNames are destinations by public username, resolved by
	// each account at start.
	DestinationNames []string
	// Routes, when given, decide where each package goes (Destinations and
	// DestinationNames are then unused). They are resolved and checked at
	// start: a chat no account knows, topics on a chat that is not a
	// forum, or a destination that is also a source stop the start, with
	// one line per problem.
	Routes []route.Spec
	// Workers per account: how many messages its live queue ingests at
	// once, and how many packages of a backlog catch-up downloads, hashes
	// and lists at once; zero means 4. Catch-up keeps catchupInFlight
	// times as many messages of a page in flight, at most
	// maxCatchupInFlight (Catchup.Parallel, when zero).
	Workers int
	// ViewSettle is how long after opening a destination an account takes
	// its session's view of it as current (tg.Views); zero means
	// tg.DefaultViewSettle.
	ViewSettle time.Duration
	// QueueCapacity per account; zero means 1024.
	QueueCapacity int
	// Rate is each account's request rate per second; zero means 20.
	Rate float64
	// SendRate is each account's send budget in send requests per minute (see
	// tg.SendBudget); zero means no send budget (sends are paced by Rate
	// only).
	SendRate float64
	// Silent sends every document without a notification
	// (disable_notification; the silent setting, default true in serve).
	Silent bool
	// SendInFlight bounds each account's sends awaiting their outcome
	// under a send budget; zero means 3.
	SendInFlight int
	// SendClock, when set, gives each account's send budget its clock (a
	// virtual one in tests and benchmarks); nil means the wall clock.
	SendClock func(account string) tg.Clock
	// Ingest is the template for every account's pipeline (Account and
	// Destinations are filled in).
	Ingest ingest.Config
	// Catchup is the template for every account's catch-up loop.
	Catchup catchup.Config
	// Rescan is the template for every account's rescan loop.
	Rescan rescan.Config
	// Retry configures the dead-letter retry loops.
	Retry ingest.RetryConfig
	// Backfill configures the walks that deliver packages catalogued before
	// a route was added to that route's destinations.
	Backfill ingest.BackfillConfig
	// Delivery configures the accounts' delivery stages, which send the
	// queued deliveries at the send budget and as routes' windows allow
	// (its SendSpacing follows SendRate).
	Delivery ingest.DeliveryConfig
	// DrainAlert is the delivery backlog's drain time past which the alert
	// StashdDeliveryBacklogDrainingSlowly fires (exported as
	// stashd_delivery_drain_alert_seconds); zero means DefaultDrainAlert.
	DrainAlert time.Duration
	// ReadyConnGrace is how long an account may be away from Telegram
	// (TDLib reconnecting after a network blip) before the instance stops
	// counting as ready; zero means 1 min. Readiness reports health, not a
	// moment's disconnect.
	ReadyConnGrace time.Duration
	// LoginPoll is how often an account that is not logged in (never, or
	// logged out remotely) is tried again, so that it resumes once stashd
	// login has logged it in; zero means DefaultLoginPoll (30 s).
	LoginPoll time.Duration
	// DrainTimeout bounds the graceful drain at shutdown; zero means 20 s.
	DrainTimeout time.Duration
	// SendTimeout bounds the wait for one send's outcome; zero means
	// tg.DefaultSendTimeout (5 min). A send past it is reconciled by token
	// before it is sent again.
	SendTimeout time.Duration
	// Instance names this process in source claims and account leases; ""
	// means host:pid. Two daemons sharing a database must have different
	// names; a restart under the same name takes its leases back at once.
	Instance string
	// LeaseTTL is how long an account lease lasts without renewal; zero
	// means DefaultLeaseTTL (30 s). It is renewed every LeaseTTL/3, and an
	// instance that could not renew stops the account LeaseTTL/6 before
	// the lease lapses. A standby instance takes a lapsed lease over within
	// LeaseTTL/3.
	LeaseTTL time.Duration
	// OnLease, when set, is told every step of every account's lease (in
	// the goroutine that took it; it must not block).
	OnLease func(LeaseEvent)
	// DataDir is the data directory; each account keeps its live flood
	// waits in DataDir/accounts/NAME/flood_waits.json. "" keeps them in
	// the database only.
	DataDir string
	// Logger; nil discards.
	Logger *slog.Logger
	// Registry receives every metric; nil means a private registry.
	Registry prometheus.Registerer
}

// Daemon runs every account's pipeline.
type Daemon struct {
	cfg   Config
	store *store.Store
	dial  Dialer
	log   *slog.Logger

	tgm    *tg.Metrics
	lm     *listener.Metrics
	im     *ingest.Metrics
	cm     *catchup.Metrics
	rm     *rescan.Metrics
	retm   *ingest.RetryMetrics
	sbm    *tg.SendBudgetMetrics
	wm     *ingest.WindowMetrics
	leaseM *leaseMetrics
	leases leaseStore
	// rewindM counts delivery records rebuilt after a rewind.
	rewindM *rewindMetrics
	// checking is read-held by each identity check, and checksStarted
	// and checksEnded count them (rewindWatch.checkIdentity): a
	// delivery's Hold tells by them whether a check ran since its lock
	// read the destination's state (checkMark, checkedSince).
	checking                   sync.RWMutex
	checksStarted, checksEnded atomic.Int64
	// backlogM are the delivery backlog's gauges, refreshed every
	// backlogEvery (backlogInterval; shorter in tests).
	backlogM     *backlogMetrics
	backlogEvery time.Duration
	// noReadRecheck is how long an account found unable to read a source
	// is passed over for its packages (spread.go).
	noReadRecheck time.Duration
	// pickTimeout bounds the getChat calls of one pick (spread.go;
	// longer in tests).
	pickTimeout time.Duration
	// sharedEvery is how often an account looks at the chats it lists
	// that another account reads (sharedInterval; shorter in tests).
	sharedEvery time.Duration
	backlog     backlogShared
	fatal       chan error
	// authM and auth track each account's login state (auth.go).
	authM *authMetrics
	auth  authState

	mu       sync.Mutex
	accounts []*accountRun // running, under a held lease
	leasers  []*leaser
	closing  bool        // Shutdown or Kill began: no account starts any more
	running  atomic.Bool // Run has started the loops

	// beforeLostStop, when set (tests), runs between an account's lease
	// loss and its stop.
	beforeLostStop func(account string)

	// noWrite records, per account, when it was last refused write
	// access to each destination; for noWriteRecheck after that,
	// deliveries there go to another account (refusedWrite).
	writeMu sync.Mutex
	noWrite map[string]map[tg.ChatID]time.Time

	// spread picks the account that sends each delivery (spread.go).
	spread *spreader

	// floodFiles keep each account's live flood waits in its directory
	// (floodfile.go); none without Config.DataDir. Shared by the
	// account's runs in this process.
	floodFiles map[string]*floodFile
}

// New returns a daemon over st; nothing starts until Start.
func New(cfg Config, st *store.Store, dial Dialer) *Daemon {
	cfg.DrainTimeout = cmp.Or(cfg.DrainTimeout, 20*time.Second)
	cfg.LeaseTTL = cmp.Or(cfg.LeaseTTL, DefaultLeaseTTL)
	cfg.DrainAlert = cmp.Or(cfg.DrainAlert, DefaultDrainAlert)
	cfg.LoginPoll = cmp.Or(cfg.LoginPoll, DefaultLoginPoll)
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := cfg.Registry
	d := &Daemon{
		cfg: cfg, store: st, dial: dial, log: log,
		tgm: tg.NewMetrics(reg), lm: listener.NewMetrics(reg), im: ingest.NewMetrics(reg),
		cm: catchup.NewMetrics(reg), rm: rescan.NewMetrics(reg), retm: ingest.NewRetryMetrics(reg),
		sbm: tg.NewSendBudgetMetrics(reg), wm: ingest.NewWindowMetrics(reg),
		leaseM: newLeaseMetrics(reg), leases: st, rewindM: newRewindMetrics(reg), backlogM: newBacklogMetrics(reg),
		fatal: make(chan error, len(cfg.Accounts)+1),
		authM: newAuthMetrics(reg), auth: authState{known: map[string]bool{}},
	}
	reg.MustRegister(newDBCollector(st))
	d.spread = newSpreader(d)
	d.floodFiles = map[string]*floodFile{}
	for _, a := range cfg.Accounts {
		d.floodFiles[a.Name] = newFloodFile(cfg.DataDir, a.Name, log)
	}
	d.backlogM.alert.Set(cfg.DrainAlert.Seconds())
	d.backlogEvery = backlogInterval
	d.sharedEvery = sharedInterval
	d.noReadRecheck = noReadRecheck
	d.pickTimeout = pickTimeout
	return d
}

// Fatal delivers an error when the daemon cannot go on (every ingest worker
// of an account dead).
func (d *Daemon) Fatal() <-chan error { return d.fatal }

// Start prepares every account and starts its loops.
func (d *Daemon) Start(ctx context.Context) error {
	if err := d.Prepare(ctx); err != nil {
		return err
	}
	return d.Run()
}

// Prepare takes the lease of every account that no other live instance
// holds, and connects each of those accounts, registers and opens its
// sources and builds its components, without starting any loop: every
// Telegram call the daemon makes after Prepare is made by a loop. An
// account another instance holds stands by: Run starts trying for its
// lease. On error, what was prepared is shut down again (leases released).
func (d *Daemon) Prepare(ctx context.Context) error {
	if len(d.cfg.Accounts) == 0 {
		return ErrNoAccounts
	}
	for _, a := range d.cfg.Accounts {
		l := d.newLeaser(a)
		d.mu.Lock()
		d.leasers = append(d.leasers, l)
		d.mu.Unlock()
		h, err := l.tryAcquire(ctx)
		if err != nil {
			d.Shutdown(context.Background())
			return fmt.Errorf("acquire the lease of account %s: %w", a.Name, err)
		}
		if h == nil {
			lease, _ := d.leases.Lease(ctx, a.Name)
			l.log.Info("account held by another instance; standing by", "owner", lease.Owner, "epoch", lease.Epoch)
			continue
		}
		// An account whose start a recorded flood wait holds (clientHold:
		// a wait of every request, or one its pending sends would break)
		// starts once the wait is over: its lease is let go here, and its
		// leaser, once Run starts it, takes the lease again and waits,
		// saying why, so that the other accounts and the daemon's start do
		// not wait for it.
		waits, err := d.recordedWaits(ctx, a.Name)
		var left time.Duration
		if err == nil {
			left, _, err = clientHold(ctx, d.store, a.Name, waits)
		}
		if err != nil {
			d.Shutdown(context.Background())
			return fmt.Errorf("start account %s: %w", a.Name, err)
		}
		if left > 0 {
			l.end(h, true)
			continue
		}
		run, err := d.startAccount(ctx, a, h, waits)
		if errors.Is(err, tg.ErrNotLoggedIn) {
			// Not run, and not the others' concern: the leaser tries it
			// again every LoginPoll, and the lease is free meanwhile.
			d.recordAuth(a.Name, false, notLoggedInState(err), notLoggedInReason(a.Name))
			l.end(h, true)
			l.loggedOut.Store(true)
			continue
		}
		if err != nil {
			d.Shutdown(context.Background())
			return fmt.Errorf("start account %s: %w", a.Name, err)
		}
		d.recordAuth(a.Name, true, "", "")
		h.run = run
		d.mu.Lock()
		d.accounts = append(d.accounts, run)
		d.mu.Unlock()
	}
	if err := d.checkRoutes(ctx); err != nil {
		d.Shutdown(context.Background())
		return err
	}
	return nil
}

// checkRoutes validates the routes against what the accounts found at
// start (see Config.Routes).
func (d *Daemon) checkRoutes(ctx context.Context) error {
	d.mu.Lock()
	runs := d.accounts
	d.mu.Unlock()
	if len(d.cfg.Routes) == 0 || len(runs) == 0 {
		return nil
	}
	watched := map[tg.ChatID]bool{}
	kinds := map[tg.ChatID]tg.ChatKind{}
	for _, r := range runs {
		d.mu.Lock()
		listed := slices.Clone(r.listed) // an upgrade followed adds to it
		d.mu.Unlock()
		for _, c := range listed {
			watched[c] = true
		}
		srcs, err := d.store.Sources(ctx, r.name)
		if err != nil {
			return err
		}
		for _, s := range srcs {
			kinds[s.ChatID] = s.Kind
		}
	}
	lookup := func(chat tg.ChatID) (tg.ChatKind, bool) {
		if k, ok := kinds[chat]; ok {
			return k, true
		}
		for _, r := range runs {
			if c, err := r.paced.GetChat(ctx, chat); err == nil {
				kinds[chat] = c.Kind
				return c.Kind, true
			}
		}
		return "", false
	}
	if err := route.Check(runs[0].routes.Routes(), func(c tg.ChatID) bool { return watched[c] }, lookup); err != nil {
		return fmt.Errorf("check routes:\n%w", err)
	}
	return nil
}

// Run starts the loops of every prepared account, and every account's
// lease loop: it renews the leases Prepare took and tries for the others.
func (d *Daemon) Run() error {
	d.mu.Lock()
	runs := d.accounts
	leasers := d.leasers
	d.mu.Unlock()
	for _, r := range runs {
		if err := r.startLoops(d.fatal); err != nil {
			d.Shutdown(context.Background())
			return fmt.Errorf("start account %s: %w", r.name, err)
		}
		r.log.Info("account started", "sources", r.sources)
	}
	for _, l := range leasers {
		if h := l.current(); h != nil && h.run != nil {
			d.leaseEvent("started", l.a.Name, h.epoch)
		}
		l.run()
	}
	d.running.Store(true)
	return nil
}

// CatchupCycles returns a channel per account that is closed when that
// account's next catch-up cycle completes. Taken between Prepare and Run,
// they mark the first full cycle after a start.
func (d *Daemon) CatchupCycles() []<-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]<-chan struct{}, len(d.accounts))
	for i, r := range d.accounts {
		out[i] = r.catch.NextCycle()
	}
	return out
}

// Shutdown stops the daemon in order. Each rule has its reason:
//
//  1. Stop receiving updates: the listener closes its queue, so the drain
//     has an end. Updates ignored from here on are not lost: start-up marks
//     every source dirty.
//  2. Let workers drain the queue until ctx's deadline (or DrainTimeout);
//     past it, work in flight is cancelled and found again by catch-up.
//  3. Stop the loops (catch-up, rescan, retry, set sweeper, delivery): they
//     feed the same pipeline, and what they leave is found again the same
//     way. A send one of them is making is finished and recorded first,
//     within the same deadline.
//  4. Stop the listener: its final write saves the watermarks of all work
//     that finished during the drain.
//  5. Close the Telegram client, last, because sends in flight during the
//     drain need its updates.
//  6. Release the account leases, once the accounts stopped, so a standby
//     instance takes them at once. Until then they are renewed: a slow
//     drain does not let them lapse, and standby instances acquire
//     nothing from the start of the shutdown.
//
// An account whose lease is lost during the drain is stopped at once, as
// Kill would.
//
// The store is the caller's to close after Shutdown.
func (d *Daemon) Shutdown(ctx context.Context) {
	d.stopLeasers(true, func() { d.stopAccounts(ctx) })
}

func (d *Daemon) stopAccounts(ctx context.Context) {
	d.mu.Lock()
	d.closing = true
	runs := d.accounts
	d.accounts = nil
	d.mu.Unlock()
	for _, r := range runs {
		r.lst.CloseQueue()
	}
	dctx, cancel := context.WithTimeout(ctx, d.cfg.DrainTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			if !r.pool.Wait(dctx) {
				r.log.Warn("drain deadline passed; work in flight cancelled")
			}
		})
	}
	wg.Wait()
	for _, r := range runs {
		// A send a loop is making finishes (SendScope) until the drain
		// deadline, which then cancels it with the rest.
		stop := context.AfterFunc(dctx, r.cancel)
		r.halt(true)
		stop()
	}
}

// Kill stops the daemon the way a crash would: work in flight is cancelled
// mid-step, nothing is drained and no final state is written, and the
// leases are not released (they lapse, or this instance's next start takes
// them back). Recovery from this is what start-up, catch-up and delivery
// reconciliation are for.
func (d *Daemon) Kill() {
	d.stopLeasers(false, func() {
		d.mu.Lock()
		d.closing = true
		runs := d.accounts
		d.accounts = nil
		d.mu.Unlock()
		for _, r := range runs {
			r.halt(false)
		}
	})
}

// Status is a snapshot of one account for progress displays.
type Status struct {
	Account       string
	QueueDepth    int
	QueueCapacity int
	WorkersAlive  int
	Dirty         int
	// Lag is the sum over sources of the newest id seen minus the watermark.
	Lag int64
}

// Status returns a snapshot per account.
func (d *Daemon) Status() []Status {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Status, 0, len(d.accounts))
	for _, r := range d.accounts {
		st := Status{Account: r.name, QueueDepth: len(r.lst.Queue()), QueueCapacity: r.lst.Capacity(), WorkersAlive: r.pool.Alive()}
		for _, c := range r.account.Sources {
			if r.lst.IsDirty(c) {
				st.Dirty++
			}
			if low, seen, ok := r.lst.Watermark(c); ok && seen > low {
				st.Lag += seen - low
			}
		}
		out = append(out, st)
	}
	return out
}

// Health reports whether the daemon can do its work: every account it runs
// has a live update pump and at least one live ingest worker, and the store
// answers (through the leases' own pool, within store.PingTimeout: a main
// pool busy with ingest says nothing of health). An instance standing by (every account's lease held by another
// instance) is healthy. The systemd watchdog is fed only while it returns
// nil.
func (d *Daemon) Health(ctx context.Context) error {
	d.mu.Lock()
	runs := d.accounts
	d.mu.Unlock()
	for _, r := range runs {
		if r.loggedOut.Load() {
			// Logged out remotely: its leaser stops it alone; the
			// others are healthy.
			continue
		}
		select {
		case <-r.sess.Done():
			return fmt.Errorf("account %s: telegram client stopped", r.name)
		default:
		}
		if r.pool.Alive() == 0 {
			return fmt.Errorf("account %s: no live ingest worker", r.name)
		}
	}
	if err := d.store.PingLeases(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return nil
}

// Ready reports whether every account this instance runs (holds the lease
// of) is connected to Telegram, or has been away for less than
// ReadyConnGrace (readiness for traffic, as /readyz shows it), on top of
// Health. A standby instance that runs no account is ready; one whose last
// start of an account it took over failed is not.
func (d *Daemon) Ready(ctx context.Context) error {
	if !d.running.Load() {
		return errors.New("starting")
	}
	if err := d.Health(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.leasers {
		if err := l.startErr.Load(); err != nil {
			return fmt.Errorf("account %s failed to start: %w", l.a.Name, *err)
		}
	}
	if out := d.loggedOutAccounts(); len(out) == len(d.cfg.Accounts) {
		return fmt.Errorf("no account is logged in (%s): run stashd login --account NAME", strings.Join(out, ", "))
	}
	grace := cmp.Or(d.cfg.ReadyConnGrace, time.Minute)
	for _, r := range d.accounts {
		if st, held := r.sess.ConnectionSince(); st != tg.ConnReady && held > grace {
			return fmt.Errorf("account %s: connection %s for %v", r.name, cmp.Or(string(st), "unknown"), held.Round(time.Second))
		}
	}
	return nil
}

// ErrNoAccounts is returned for a configuration without accounts.
var ErrNoAccounts = errors.New("no accounts configured")
