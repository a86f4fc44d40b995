package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
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
	// Workers per account; zero means 4.
	Workers int
	// QueueCapacity per account; zero means 1024.
	QueueCapacity int
	// Rate is each account's request rate per second; zero means 20.
	Rate float64
	// SendRate is each account's send budget in messages per minute (see
	// tg.SendBudget); zero means no send budget (sends are paced by Rate
	// only).
	SendRate float64
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
	fatal  chan error

	mu       sync.Mutex
	accounts []*accountRun // running, under a held lease
	leasers  []*leaser
	closing  bool        // Shutdown or Kill began: no account starts any more
	running  atomic.Bool // Run has started the loops

	// beforeLostStop, when set (tests), runs between an account's lease
	// loss and its stop.
	beforeLostStop func(account string)

	// noWrite records, per account, the destinations it was refused
	// write access to in this run; deliveries there go to another account.
	writeMu sync.Mutex
	noWrite map[string]map[tg.ChatID]bool

	// spread picks the account that sends each delivery (spread.go).
	spread *spreader
}

// New returns a daemon over st; nothing starts until Start.
func New(cfg Config, st *store.Store, dial Dialer) *Daemon {
	cfg.DrainTimeout = cmp.Or(cfg.DrainTimeout, 20*time.Second)
	cfg.LeaseTTL = cmp.Or(cfg.LeaseTTL, DefaultLeaseTTL)
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
		leaseM: newLeaseMetrics(reg), leases: st,
		fatal: make(chan error, len(cfg.Accounts)+1),
	}
	d.spread = newSpreader(d)
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
		run, err := d.startAccount(ctx, a, h)
		if err != nil {
			d.Shutdown(context.Background())
			return fmt.Errorf("start account %s: %w", a.Name, err)
		}
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
		for _, c := range r.account.Sources {
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
//  3. Stop the loops (catch-up, rescan, retry, set sweeper): they feed the
//     same pipeline, and what they leave is found again the same way.
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
		r.halt(true)
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

// halt stops the account's components after the drain (graceful, steps 3
// to 5 of Shutdown) or the way a crash would (cancel, close the Telegram
// client, stop the loops; nothing drained or written). Only the first call
// acts; a concurrent one waits for it.
func (r *accountRun) halt(graceful bool) {
	r.haltOnce.Do(func() {
		if graceful {
			r.follow.Stop() // it adds sources to catch-up and rescan
			r.catch.Stop()
			r.resc.Stop()
			r.retry.Stop()
			r.backfill.Stop()
			r.deliver.Stop()
			r.sweep.Stop()
			r.cancel()
			r.rec.Stop()
			r.lst.Stop()
			if err := r.client.Close(); err != nil {
				r.log.Warn("close telegram client", "err", err)
			}
			<-r.sess.Done()
			return
		}
		// The client first: from here on the account makes no request.
		r.cancel()
		_ = r.client.Close()
		r.pool.Stop()
		r.follow.Stop()
		r.catch.Stop()
		r.resc.Stop()
		r.retry.Stop()
		r.backfill.Stop()
		r.deliver.Stop()
		r.sweep.Stop()
		r.rec.Stop()
		r.lst.Kill()
		<-r.sess.Done()
	})
}

// unclaimedSends bounds the send outcomes of earlier sessions waiting for
// the recorder; more are dropped and left to reconciliation.
const unclaimedSends = 256

// accountRun is one account's running components.
type accountRun struct {
	name     string
	log      *slog.Logger
	client   tg.Client
	paced    *tg.Paced
	sess     *tg.Session
	lst      *listener.Listener
	pipe     *ingest.Pipeline
	pool     *ingest.Pool
	sweep    *ingest.SetSweeper
	catch    *catchup.Catchup
	resc     *rescan.Rescan
	retry    *ingest.Retrier
	backfill *ingest.Backfiller
	deliver  *ingest.Deliverer
	rec      *ingest.SendRecorder
	follow   *upgradeFollower
	ctx      context.Context
	cancel   context.CancelFunc
	sources  int
	account  Account // with named sources resolved
	routes   *route.Table
	haltOnce sync.Once
}

func (r *accountRun) startLoops(fatal chan<- error) error {
	// The backfill first: it records new routes before ingest delivers
	// anything under them, so its walk ends where routing at ingest starts.
	for _, s := range []interface{ Start(context.Context) error }{r.backfill, r.rec, r.lst, r.pool, r.sweep, r.catch, r.resc, r.retry, r.deliver, r.follow} {
		if err := s.Start(r.ctx); err != nil {
			return err
		}
	}
	go func() {
		select {
		case err := <-r.pool.Fatal():
			select {
			case fatal <- err:
			case <-r.ctx.Done():
			}
		case <-r.ctx.Done():
		}
	}()
	return nil
}

// startAccount starts account a under the lease tenure h: every fenced
// write it makes carries h's epoch (and a refusal loses the lease), and
// every Telegram request is gated on h.
func (d *Daemon) startAccount(ctx context.Context, a Account, h *holding) (*accountRun, error) {
	log := d.log.With("account", a.Name)
	ctx = store.WithFence(ctx, a.Name, h.epoch, h.lose)
	if err := h.gate(); err != nil {
		return nil, err
	}
	client, err := d.dial(ctx, a.Name)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	r := &accountRun{name: a.Name, log: log, client: client, sources: len(a.Sources)}
	// Every component of the account runs under its own context, cancelled
	// by Shutdown after the drain (or at once when the lease is lost).
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.ctx, r.cancel = actx, cancel
	h.cancelOnLoss(cancel)
	fail := func(err error) (*accountRun, error) {
		cancel()
		_ = client.Close()
		return nil, err
	}

	r.paced = tg.NewPaced(client, tg.PacedConfig{Account: a.Name, Rate: d.cfg.Rate, Gate: h.gate}, d.tgm)
	// Set below, while the session's pump may already be reporting a
	// reconnect: published atomically so the pump sees a whole Rescan.
	var resc atomic.Pointer[rescan.Rescan]
	r.lst = listener.New(listener.Config{
		Account: a.Name, QueueCapacity: d.cfg.QueueCapacity, Logger: d.log,
		OnReconnect: func(down time.Duration) {
			if rs := resc.Load(); rs != nil {
				rs.Outage(down)
			}
		},
	}, d.store, d.lm)
	// Sends of an earlier session that TDLib finished by itself reach this
	// session unclaimed; the recorder records them by token.
	unclaimed := make(chan tg.Message, unclaimedSends)
	lst := r.lst
	follow := newUpgradeFollower(d, r)
	r.follow = follow
	r.sess = tg.NewSession(r.paced, func(u tg.Update) {
		switch u := u.(type) {
		case tg.SendSucceeded:
			select {
			case unclaimed <- u.Message:
			default:
			}
		case tg.ChatUpgraded:
			follow.offer(u)
		}
		lst.HandleUpdate(u)
	})
	r.sess.SendTimeout = d.cfg.SendTimeout
	if d.cfg.SendRate > 0 {
		bcfg := tg.SendBudgetConfig{Account: a.Name, PerMinute: d.cfg.SendRate, InFlight: d.cfg.SendInFlight}
		if d.cfg.SendClock != nil {
			bcfg.Clock = d.cfg.SendClock(a.Name)
		}
		r.sess.Budget = tg.NewSendBudget(bcfg, d.sbm)
	}

	if err := r.paced.LoadChats(ctx); err != nil {
		return fail(fmt.Errorf("load chats: %w", err))
	}
	me, err := r.paced.GetMe(ctx)
	if err != nil {
		return fail(fmt.Errorf("get me: %w", err))
	}
	if err := d.store.UpsertAccount(ctx, a.Name, me.ID, me.IsPremium); err != nil {
		return fail(err)
	}
	a, dests, accept, err := d.resolve(ctx, r, a)
	if err != nil {
		return fail(err)
	}
	histories, err := d.resolveHistory(ctx, r, a)
	if err != nil {
		return fail(err)
	}
	if r.routes, err = d.resolveRoutes(ctx, r); err != nil {
		return fail(err)
	}
	if err := d.registerSources(ctx, r, a, histories); err != nil {
		return fail(err)
	}
	// Basic groups upgraded in an earlier run continue in their
	// supergroups, which are sources of their own by now.
	known, err := d.store.Sources(ctx, a.Name)
	if err != nil {
		return fail(err)
	}
	upgraded := map[tg.ChatID]tg.ChatID{}
	for _, s := range known {
		if s.UpgradedTo != 0 {
			upgraded[s.ChatID] = s.UpgradedTo
			log.Info("source was upgraded to a supergroup; following it", "source", s.ChatID, "supergroup", s.UpgradedTo)
		}
	}
	a.Sources = followStoredUpgrades(a.Sources, upgraded)
	r.sources = len(a.Sources)
	r.account = a
	if err := d.store.MarkAccountDirty(ctx, a.Name, listener.ReasonStart); err != nil {
		return fail(err)
	}
	srcs, err := d.store.Sources(ctx, a.Name)
	if err != nil {
		return fail(err)
	}
	for _, s := range srcs {
		r.lst.Watch(s)
	}
	// Updates for channels and supergroups arrive only for opened chats.
	for _, chat := range a.Sources {
		if err := r.paced.OpenChat(ctx, chat); err != nil {
			log.Warn("open chat failed; the source relies on catch-up", "source", chat, "err", err)
			r.lst.MarkDirty(chat, "open_failed")
		}
	}

	icfg := d.cfg.Ingest
	icfg.Account, icfg.Destinations, icfg.Logger, icfg.Accept = a.Name, dests, d.log, accept
	icfg.Routes = r.routes
	if len(d.cfg.Accounts) > 1 {
		icfg.HandOver = func(dest tg.ChatID) (string, bool) { return d.handOver(a.Name, dest) }
		if d.cfg.SendRate > 0 {
			// With send budgets, any account that can write to a
			// destination sends there, the one with most room first.
			icfg.Spread = func(src, dest tg.ChatID, parts int) (*ingest.Pipeline, func()) {
				return d.spread.pick(a.Name, src, dest, parts)
			}
		}
	}
	icfg.SourceSynced = func(chat tg.ChatID, upTo int64) bool {
		low, _, ok := lst.Watermark(chat)
		return ok && !lst.IsDirty(chat) && low >= upTo
	}
	icfg.InFlight = lst.InFlight
	r.pipe = ingest.NewPipeline(icfg, d.store, r.sess, d.im)
	r.pool = ingest.NewPool(ingest.PoolConfig{Account: a.Name, Workers: d.cfg.Workers, Logger: d.log}, r.lst, r.pipe, d.im)
	r.sweep = ingest.NewSetSweeper(r.pipe, 0)
	ccfg := d.cfg.Catchup
	ccfg.Account, ccfg.Owner, ccfg.Sources, ccfg.Logger = a.Name, d.cfg.Instance, a.Sources, d.log
	r.catch = catchup.New(ccfg, d.store, r.paced, r.lst, r.pipe, d.cm)
	rcfg := d.cfg.Rescan
	rcfg.Account, rcfg.Sources, rcfg.Logger = a.Name, a.Sources, d.log
	r.resc = rescan.New(rcfg, r.paced, d.store, r.pipe, d.rm)
	resc.Store(r.resc)
	r.retry = ingest.NewRetrier(d.cfg.Retry, r.pipe, d.store, d.retm)
	r.backfill = ingest.NewBackfiller(d.cfg.Backfill, r.pipe, d.store)
	dcfg := d.cfg.Delivery
	if d.cfg.SendRate > 0 {
		dcfg.SendSpacing = time.Duration(float64(time.Minute) / d.cfg.SendRate)
	}
	r.deliver = ingest.NewDeliverer(dcfg, r.pipe, d.store, d.wm)
	r.rec = ingest.NewSendRecorder(r.pipe, unclaimed)

	return r, nil
}

// resolve turns an account's named sources and destinations into chat ids
// (searchPublicChat, once per name at start) and builds its topic filter.
// A name that does not resolve is an error that stops the start: a typo in
// the configuration must not look like an idle source.
func (d *Daemon) resolve(ctx context.Context, r *accountRun, a Account) (Account, []tg.ChatID, func(tg.Message) bool, error) {
	byName := map[string]tg.ChatID{}
	lookup := func(name string) (tg.ChatID, error) {
		if id, ok := byName[name]; ok {
			return id, nil
		}
		c, err := r.paced.SearchPublicChat(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("resolve @%s: %w", name, err)
		}
		byName[name] = c.ID
		return c.ID, nil
	}
	out := a
	out.Sources = append([]tg.ChatID(nil), a.Sources...)
	for _, name := range a.Named {
		id, err := lookup(name)
		if err != nil {
			return a, nil, nil, err
		}
		out.Sources = append(out.Sources, id)
	}
	dests := append([]tg.ChatID(nil), d.cfg.Destinations...)
	for _, name := range d.cfg.DestinationNames {
		id, err := lookup(name)
		if err != nil {
			return a, nil, nil, err
		}
		dests = append(dests, id)
	}
	topics := map[tg.ChatID]map[int64]bool{}
	for key, list := range a.Topics {
		var id tg.ChatID
		if name, ok := strings.CutPrefix(key, "@"); ok {
			var err error
			if id, err = lookup(name); err != nil {
				return a, nil, nil, err
			}
		} else {
			n, err := strconv.ParseInt(key, 10, 64)
			if err != nil {
				return a, nil, nil, fmt.Errorf("topic filter key %q is neither a chat id nor @username", key)
			}
			id = tg.ChatID(n)
		}
		topics[id] = map[int64]bool{}
		for _, t := range list {
			topics[id][t] = true
		}
	}
	var accept func(tg.Message) bool
	if len(topics) > 0 {
		accept = func(m tg.Message) bool {
			allowed, filtered := topics[m.ChatID]
			return !filtered || allowed[m.TopicID()]
		}
	}
	return out, dests, accept, nil
}

// handOver records that account from may not write to dest and picks
// another running account that has not been refused there, in
// configuration order.
func (d *Daemon) handOver(from string, dest tg.ChatID) (string, bool) {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	if d.noWrite == nil {
		d.noWrite = map[string]map[tg.ChatID]bool{}
	}
	if d.noWrite[from] == nil {
		d.noWrite[from] = map[tg.ChatID]bool{}
	}
	d.noWrite[from][dest] = true
	d.mu.Lock()
	runs := d.accounts
	d.mu.Unlock()
	for _, r := range runs {
		if r.name != from && !d.noWrite[r.name][dest] {
			return r.name, true
		}
	}
	return "", false
}

// resolveRoutes resolves the routes' usernames through the account's
// session (searchPublicChat, once per name). Every problem is reported,
// one line each.
func (d *Daemon) resolveRoutes(ctx context.Context, r *accountRun) (*route.Table, error) {
	if len(d.cfg.Routes) == 0 {
		return nil, nil
	}
	byName := map[string]tg.ChatID{}
	lookup := func(name string) (tg.ChatID, error) {
		if id, ok := byName[name]; ok {
			return id, nil
		}
		c, err := r.paced.SearchPublicChat(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("unknown chat: %w", err)
		}
		byName[name] = c.ID
		return c.ID, nil
	}
	var routes []route.Route
	var errs []error
	for _, s := range d.cfg.Routes {
		rt, err := s.Resolve(lookup)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		routes = append(routes, rt)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("resolve routes:\n%w", errors.Join(errs...))
	}
	return route.NewTable(nil, routes), nil
}

// resolveHistory keys the account's history policies by chat id.
func (d *Daemon) resolveHistory(ctx context.Context, r *accountRun, a Account) (map[tg.ChatID]History, error) {
	out := map[tg.ChatID]History{}
	for key, h := range a.History {
		if name, ok := strings.CutPrefix(key, "@"); ok {
			c, err := r.paced.SearchPublicChat(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("resolve @%s: %w", name, err)
			}
			out[c.ID] = h
			continue
		}
		n, err := strconv.ParseInt(key, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("history key %q is neither a chat id nor @username", key)
		}
		out[tg.ChatID(n)] = h
	}
	return out, nil
}

// historyStart is where a newly added source catches up from under its
// history policy: its newest message (none), or the newest message older
// than the policy's stretch, as a watermark (server id). A chat without
// such a message, or the policy "all", starts at 0, its beginning.
func historyStart(ctx context.Context, r *accountRun, chat tg.ChatID, h History) (int64, error) {
	if !h.None && h.Since <= 0 {
		return 0, nil
	}
	at := time.Now()
	if !h.None {
		at = at.Add(-h.Since)
	}
	m, err := r.paced.GetChatMessageByDate(ctx, chat, at)
	switch {
	case errors.Is(err, tg.ErrMessageNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("find the start of source %d's history: %w", chat, err)
	}
	r.log.Info("new source catches up from its history policy", "source", chat, "none", h.None, "since", h.Since, "from_message", m.ID.ServerID())
	return m.ID.ServerID(), nil
}

// registerSources records sources the store does not know yet, with their
// kind, title and where each catches up from (histories). Known
// sources cost no call: a restart must stay cheap.
func (d *Daemon) registerSources(ctx context.Context, r *accountRun, a Account, histories map[tg.ChatID]History) error {
	known := map[tg.ChatID]bool{}
	srcs, err := d.store.Sources(ctx, a.Name)
	if err != nil {
		return err
	}
	for _, s := range srcs {
		known[s.ChatID] = true
	}
	for _, chat := range a.Sources {
		if known[chat] {
			continue
		}
		src := store.Source{ChatID: chat, Account: a.Name, Kind: tg.KindChannel}
		c, err := r.paced.GetChat(ctx, chat)
		accessible := err == nil
		switch {
		case err == nil:
			src.Kind, src.Title = c.Kind, c.Title
		case tg.Classify(err) == tg.ClassPermanent:
			// Registered anyway: catch-up opens its circuit and the
			// dashboard shows it; one bad source never stops the others.
			r.log.Warn("source not accessible", "source", chat, "err", err)
		default:
			return fmt.Errorf("get chat %d: %w", chat, err)
		}
		// The start goes in with the source: a start cut short before it
		// is found registers nothing, and the next start asks again.
		if h, ok := histories[chat]; ok && accessible {
			if src.Watermark, err = historyStart(ctx, r, chat, h); err != nil {
				return err
			}
		}
		if err := d.store.EnsureSource(ctx, src); err != nil {
			return err
		}
	}
	return nil
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
// answers. An instance standing by (every account's lease held by another
// instance) is healthy. The systemd watchdog is fed only while it returns
// nil.
func (d *Daemon) Health(ctx context.Context) error {
	d.mu.Lock()
	runs := d.accounts
	d.mu.Unlock()
	for _, r := range runs {
		select {
		case <-r.sess.Done():
			return fmt.Errorf("account %s: telegram client stopped", r.name)
		default:
		}
		if r.pool.Alive() == 0 {
			return fmt.Errorf("account %s: no live ingest worker", r.name)
		}
	}
	if err := d.store.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return nil
}

// Ready reports whether every account this instance runs (holds the lease
// of) is connected to Telegram (readiness for traffic, as /readyz shows
// it), on top of Health. A standby instance that runs no account is ready;
// one whose last start of an account it took over failed is not.
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
	for _, r := range d.accounts {
		if st := r.sess.ConnectionState(); st != tg.ConnReady {
			return fmt.Errorf("account %s: connection %s", r.name, cmp.Or(string(st), "unknown"))
		}
	}
	return nil
}

// ErrNoAccounts is returned for a configuration without accounts.
var ErrNoAccounts = errors.New("no accounts configured")
