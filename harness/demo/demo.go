// Package demo runs the whole stashd pipeline against the Telegram simulator
// and audits the result against the simulator's ground truth. It backs
// `stashd demo` and the end-to-end tests; it owns the scenario (publisher,
// faults, restarts) and the audit, and builds the daemon exactly as serve
// does, with only the Telegram client swapped.
package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"stashd/daemon"
	"stashd/harness/audit"
	"stashd/ingest"
	"stashd/internal/infometrics"
	"stashd/internal/service"
	"stashd/route"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// Options configure a demo run. Zero values take the defaults in brackets.
type Options struct {
	// Duration of publishing [20 s]; ignored when Steps is set.
	Duration time.Duration
	// Steps publishes exactly this many items, as fast as Rate allows.
	Steps int
	// Seed of the simulator and generator.
	Seed int64
	// Sources is the number of plain sources [4].
	Sources int
	// ForumTopics adds a forum with this many topics [0].
	ForumTopics int
	// Accounts [2].
	Accounts int
	// Destinations [1].
	Destinations int
	// ForumDestination adds a destination forum, demo_dest_forum, without
	// topics: routes may send into its topics (topic = "same" creates them).
	ForumDestination bool
	// Routes decide where packages go; nil sends every package to every
	// destination. They name the demo's chats by username: demo_source1..N
	// (plain sources in order), demo_forum, demo_dest1..N and
	// demo_dest_forum.
	Routes []route.Spec
	// Rate of publication, items per second [20]; negative means no pause.
	Rate float64
	// Workers per account [4].
	Workers int
	// PoolConns bounds the catalogue's pool [daemon.PoolConns, as serve].
	PoolConns int32
	// QueueCapacity per account [256].
	QueueCapacity int
	// PostDir, when set, is posted file by file before the generator runs
	// (by its expect.toml manifest when it has one: docs/hostile.md).
	PostDir string
	// DeadLetterBroken dead-letters archives that fail verification, as
	// the daemon does unless deliver_broken; false mirrors them with their
	// listing error (the demo's default, which its corrupt archives test).
	DeadLetterBroken bool
	// RepacksSetting is the daemon's repacks setting ("" is skip).
	RepacksSetting string
	// Repacks is the probability that a step re-posts an earlier package's
	// files in another container (tgsim.Scenario.Repacks).
	Repacks float64
	// EditDocuments is the probability that a step replaces the document
	// of an earlier single archive with a new one (editMessageMedia,
	// tgsim.Scenario.EditDocuments).
	EditDocuments float64
	// DropUpdates is the probability an updateNewMessage is lost.
	DropUpdates float64
	// FailSends is the probability that a send ends in
	// updateMessageSendFailed: half of them a 500, half a 429 "retry after
	// 1" that pauses the sends to that chat.
	FailSends float64
	// VanishSends is the probability that a pending send is deleted
	// (updateDeleteMessages for its temporary id) instead of sent or failed.
	VanishSends float64
	// CloseTopics and DeleteTopics are the probabilities that each topic
	// of the destination forum is closed (and reopened 1.5 s later), or
	// deleted with its messages, at each of eight moments of the run
	// (ForumDestination; see topicFaults); above zero, the first topic
	// there is to hit is hit for certain. Zero never.
	CloseTopics  float64
	DeleteTopics float64
	// ChatFlood is the share of destinations (0..1, rounded up: any share
	// above zero takes at least one) that get a tight per-chat send limit:
	// 5 sends a second per account, beyond which a send fails with 429
	// "Too Many Requests: retry after 1" in updateMessageSendFailed
	// (tgsim.World.LimitChatSends). Zero none.
	ChatFlood float64
	// DisconnectEvery disconnects every account this often (for a quarter of
	// the period); zero never.
	DisconnectEvery time.Duration
	// LogoutAccounts logs this many accounts out remotely a third of the
	// way through publishing and in again at two thirds (logout.go).
	LogoutAccounts int
	// RestartEvery restarts the daemon this often, every other restart
	// abruptly (a crash: no drain, no final write); zero never.
	RestartEvery time.Duration
	// StallDownloads is the probability that a download stops making
	// progress and never completes; FailDownloads that it ends failed
	// (TDLib's updateFile neither active nor complete).
	StallDownloads float64
	FailDownloads  float64
	// DownloadStall is the daemon's stall limit on downloads [2 s].
	DownloadStall time.Duration
	// DownloadBudget is each account's download budget in bytes [512 KiB:
	// above the generator's largest package, below what the workers would
	// hold without a bound].
	DownloadBudget int64
	// LoseAccess is the probability that each source becomes inaccessible
	// halfway through publishing (getChat and openChat still answer, server
	// calls fail with 400 "Can't access the chat"); zero never.
	LoseAccess float64
	// IgnorableErrors is the probability that a history request fails with
	// 406, which stashd must drop silently; zero never.
	IgnorableErrors float64
	// UnknownLastMessage is the probability that getChat reports a chat's
	// last message as unknown (null); zero never.
	UnknownLastMessage float64
	// ArchivedSources is the probability that each source is in the archive
	// chat list ("Chat not found" until loadChats(chatListArchive)); zero
	// none.
	ArchivedSources float64
	// ProtectedSources is the probability that each source has protected
	// content (its documents cannot be re-sent); zero none.
	ProtectedSources float64
	// IdleRestart: after settling, restart with nothing new published and
	// report the calls of the first full catch-up cycle.
	IdleRestart bool
	// RestoreBackup takes a pg_dump of the catalogue halfway through
	// publishing and, once the run has settled and been audited, stops the
	// daemon, restores the dump over the catalogue, starts a new daemon and
	// audits again (Report.DeliveriesRecovered counts the delivery records
	// it rebuilt from the destinations).
	RestoreBackup bool
	// SettleTimeout bounds the wait for the pipeline to finish after
	// publishing [60 s].
	SettleTimeout time.Duration
	// DatabaseURL of a migrated-on-open PostgreSQL database. Required.
	DatabaseURL string
	// FilesDir receives simulated downloads. Required.
	FilesDir string
	// Logger; nil discards.
	Logger *slog.Logger
	// Progress, when set, is called about four times a second.
	Progress func(Progress)
	// Connect, when set, replaces the in-process simulated client: it
	// returns a started Telegram client for an account of world (the
	// TDLib-JSON test world uses it to put the real TDLib adapter between
	// the daemon and the simulator).
	Connect func(ctx context.Context, world *tgsim.World, account string) (tg.Client, error)
	// Inspect, when set, runs once the pipeline has settled and been
	// audited, against the settled world while the daemon still runs
	// (stashd demo --doctor and --chats). Its error ends the run.
	Inspect func(ctx context.Context, s Settled) error
	// Gatherer, when set, receives the current daemon's registry each time
	// a daemon starts (for a /metrics endpoint that survives restarts).
	Gatherer func(prometheus.Gatherer)
}

// Progress is a live snapshot for the one-line display.
type Progress struct {
	Elapsed time.Duration
	// Published counts the items posted so far (archives, parts, albums,
	// noise); PublishedFor is how long posting has run, which stops
	// growing once it ends, so Published/PublishedFor is the posting rate.
	Published    int
	PublishedFor time.Duration
	// Publishing is true until posting ends.
	Publishing bool
	Catalogued int
	Queue      int
	Lag        int64
	Dirty      int
	Duplicates int
	DeadLetter int
	Restarts   int
}

// Report is the audit of a demo run.
type Report = audit.Report

// Run runs one demo and returns its audit. An error means the demo could
// not run; a failed audit is a Report with OK() false.
func Run(ctx context.Context, o Options) (Report, error) {
	o.Duration = cmp.Or(o.Duration, 20*time.Second)
	o.Sources = cmp.Or(o.Sources, 4)
	o.Accounts = cmp.Or(o.Accounts, 2)
	o.Rate = cmp.Or(o.Rate, 20)
	o.Workers = cmp.Or(o.Workers, 4)
	o.QueueCapacity = cmp.Or(o.QueueCapacity, 256)
	o.SettleTimeout = cmp.Or(o.SettleTimeout, 60*time.Second)
	o.DownloadStall = cmp.Or(o.DownloadStall, 2*time.Second)
	o.DownloadBudget = cmp.Or(o.DownloadBudget, 512<<10)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.DatabaseURL == "" || o.FilesDir == "" {
		return Report{}, errors.New("demo: DatabaseURL and FilesDir are required")
	}
	st, err := store.Open(ctx, store.Config{URL: o.DatabaseURL, MaxConns: cmp.Or(o.PoolConns, daemon.PoolConns(o.Accounts, o.Workers))})
	if err != nil {
		return Report{}, err
	}
	defer st.Close()

	world := tgsim.NewWorld(tgsim.Config{
		Seed: o.Seed, DropRate: o.DropUpdates, FilesDir: o.FilesDir,
		SendFailRate: o.FailSends / 2, SendFloodRate: o.FailSends / 2, SendFloodWait: time.Second,
		SendVanishRate: o.VanishSends,
		// TDLib's behaviours, always on: a killed daemon's pending sends
		// finish when the account's client starts again, and server search
		// with a query lags behind.
		ResendAfterRestart: true, SearchIndexLag: time.Minute,
		// TDLib sits out a flood wait of a second, once per request, on
		// the demo's time scale (its limit is a minute): a flooded
		// destination's sends (Options.ChatFlood) then land late, or
		// reach the daemon as 429s when refused again.
		FloodSitOut:       time.Second,
		StallDownloadRate: o.StallDownloads, FailDownloadRate: o.FailDownloads,
		IgnorableErrorRate: o.IgnorableErrors, UnknownLastMessageRate: o.UnknownLastMessage,
	})
	gen := tgsim.NewGenerator(world, tgsim.Scenario{
		Seed: o.Seed, Sources: o.Sources, ForumTopics: o.ForumTopics, Accounts: o.Accounts, Destinations: o.Destinations,
		ForumDestination: o.ForumDestination, Repacks: o.Repacks, EditDocuments: o.EditDocuments,
	})
	nameDemoChats(world, gen)
	routes, err := routeTable(gen, o.Routes)
	if err != nil {
		return Report{}, fmt.Errorf("demo routes: %w", err)
	}
	r := &runner{o: o, log: log, st: st, world: world, gen: gen, routes: routes,
		rng:  rand.New(rand.NewPCG(uint64(o.Seed), 0x6661756c74)), // "fault"
		lost: map[tg.ChatID]bool{}, protected: map[tg.ChatID]bool{}}
	for _, s := range gen.Sources() {
		if r.chance(o.ArchivedSources) {
			world.SetArchived(s.Chat, true)
		}
		if r.chance(o.ProtectedSources) {
			world.SetProtected(s.Chat, true)
			r.protected[s.Chat] = true
		}
	}
	r.floodChats()
	start := time.Now()
	rep, err := r.run(ctx)
	rep.ElapsedSeconds = time.Since(start).Seconds()
	return rep, err
}

type runner struct {
	o     Options
	log   *slog.Logger
	st    *store.Store
	world *tgsim.World
	gen   *tgsim.Generator
	// routes is Options.Routes resolved, for the audit; nil without.
	routes *route.Table

	// rng draws the fault knobs' choices; lost and protected are the
	// sources they hit. Only the publishing goroutine writes lost, before
	// the audit reads it.
	rng       *rand.Rand
	lost      map[tg.ChatID]bool
	protected map[tg.ChatID]bool
	// flooded are the destinations with a tight send limit (ChatFlood).
	flooded []tg.ChatID

	mu       sync.Mutex
	d        *daemon.Daemon
	restarts int
	fatal    chan error
}

func (r *runner) chance(p float64) bool { return p > 0 && r.rng.Float64() < p }

// loseAccess takes access to each source away with Options.LoseAccess.
func (r *runner) loseAccess() {
	for _, s := range r.gen.Sources() {
		if r.chance(r.o.LoseAccess) {
			r.world.LoseAccess(s.Chat, true)
			r.mu.Lock()
			r.lost[s.Chat] = true
			r.mu.Unlock()
		}
	}
}

func (r *runner) config(reg prometheus.Registerer) daemon.Config {
	var accounts []daemon.Account
	for _, name := range r.gen.Accounts() {
		a := daemon.Account{Name: name}
		for _, s := range r.gen.Sources() {
			if s.Account == name {
				a.Sources = append(a.Sources, s.Chat)
			}
		}
		accounts = append(accounts, a)
	}
	cfg := daemon.Config{
		Accounts: accounts, Destinations: r.gen.Destinations(), Routes: r.o.Routes,
		Workers: r.o.Workers, QueueCapacity: r.o.QueueCapacity, Rate: 1000,
		// A send budget on the demo's time scale (1 ms apart), so sends
		// take their turns as in production.
		SendRate: 60000, SendInFlight: r.o.Workers,
		// As serve's default (silent = true).
		Silent: true,
		Ingest: ingest.Config{
			SetSettle: 300 * time.Millisecond, SetMaxWait: 2 * time.Second,
			DeadLetterBroken: r.o.DeadLetterBroken, Repacks: r.o.RepacksSetting,
			// Dead letters are retried on the demo's time scale (production:
			// a minute, doubling, 8 attempts), so a package whose fetch or
			// delivery failed for a while is delivered later by the retry
			// loop, as it would be in production.
			RetryBase: 50 * time.Millisecond, DeadLetterDelay: time.Second, DeadLetterAttempts: 4,
			DownloadStall: r.o.DownloadStall, DownloadBudget: r.o.DownloadBudget,
		},
		Retry: ingest.RetryConfig{Interval: time.Second},
		// A failed delivery is tried again on the demo's time scale too.
		Delivery:     ingest.DeliveryConfig{Interval: 250 * time.Millisecond, RetryDelay: 50 * time.Millisecond},
		DrainTimeout: 5 * time.Second,
		// An account logged in again resumes on the demo's time scale.
		LoginPoll: 250 * time.Millisecond,
		Logger:    r.log,
		Registry:  reg,
	}
	// An account away longer than this (logged out, or the daemon
	// stopped) rescans its sources at start, on the demo's time scale
	// (production: 5 min): edits made meanwhile reach no update.
	cfg.Rescan.OutageThreshold = 2 * time.Second
	cfg.Catchup.Interval = 250 * time.Millisecond
	cfg.Catchup.Policy.ColdDelay = time.Second
	cfg.Catchup.Policy.RetryDelay = 200 * time.Millisecond
	return cfg
}

// start builds and starts a daemon on fresh simulated clients (a new TDLib
// instance per account, as after a process restart).
// beforeRun, when set, is called between the daemon's Prepare and Run:
// every Telegram call after it is made by a loop.
func (r *runner) start(ctx context.Context, beforeRun func(*daemon.Daemon)) (*daemon.Daemon, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	infometrics.Register(reg, r.st, daemon.DefaultLeaseTTL)
	d := daemon.New(r.config(reg), r.st, r.dial)
	if err := d.Prepare(ctx); err != nil {
		return nil, err
	}
	if beforeRun != nil {
		beforeRun(d)
	}
	if err := d.Run(); err != nil {
		return nil, err
	}
	if r.o.Gatherer != nil {
		r.o.Gatherer(reg)
	}
	go func() {
		if err := <-d.Fatal(); err != nil {
			select {
			case r.fatal <- err:
			default:
			}
		}
	}()
	return d, nil
}

// dial returns a fresh client of account: a new TDLib instance, as after a
// process restart.
func (r *runner) dial(ctx context.Context, account string) (tg.Client, error) {
	if r.o.Connect != nil {
		return r.o.Connect(ctx, r.world, account)
	}
	c, err := r.world.Dial(account, "")
	if err != nil {
		return nil, err // not logged in (LogoutAccounts)
	}
	return c, nil
}

func (r *runner) current() *daemon.Daemon {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.d
}

func (r *runner) run(ctx context.Context) (Report, error) {
	r.fatal = make(chan error, 1)
	d, err := r.start(ctx, nil)
	if err != nil {
		return Report{}, err
	}
	r.d = d
	defer func() {
		if d := r.current(); d != nil {
			d.Shutdown(context.Background())
		}
	}()

	start := time.Now()
	if r.o.PostDir != "" {
		if err := r.gen.PostDir(r.o.PostDir); err != nil {
			return Report{}, fmt.Errorf("post %s: %w", r.o.PostDir, err)
		}
	}
	var published, publishedFor atomic.Int64
	pubDone := make(chan struct{})
	pctx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()
	go func() {
		defer close(pubDone)
		r.publish(pctx, &published)
		publishedFor.Store(int64(time.Since(start)))
	}()
	var dumped <-chan error
	if r.o.RestoreBackup {
		dumped = r.backup(ctx)
	}
	var faults sync.WaitGroup
	if r.o.DisconnectEvery > 0 {
		faults.Go(func() { r.disconnects(pctx) })
	}
	if r.o.RestartEvery > 0 {
		faults.Go(func() { r.restartLoop(pctx, ctx) })
	}
	// Topic faults outlive publishing until each asked for has happened
	// (topicFaults), so they stop on their own context.
	tctx, stopTopics := context.WithCancel(ctx)
	defer stopTopics()
	faults.Go(func() { r.topicFaults(tctx, pubDone) })
	if r.o.LogoutAccounts > 0 {
		faults.Go(func() { r.logouts(pctx) })
	}
	// The disk sampler runs until the pipeline has settled: downloads go on
	// after publishing ends.
	disk := newDiskSampler(r.o.FilesDir)
	dctx, stopDisk := context.WithCancel(ctx)
	defer stopDisk()
	diskDone := make(chan struct{})
	go func() {
		defer close(diskDone)
		disk.run(dctx)
	}()
	progressDone := make(chan struct{})
	if r.o.Progress != nil {
		go func() {
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-progressDone:
					return
				case <-t.C:
					r.o.Progress(r.progress(ctx, start, int(published.Load()), time.Duration(publishedFor.Load())))
				}
			}
		}()
	}
	defer close(progressDone)

	select {
	case <-pubDone:
	case err := <-r.fatal:
		return Report{}, err
	case <-ctx.Done():
		return Report{}, ctx.Err()
	}
	stopFaults()
	faults.Wait()
	// A disconnect window may still be open: end it, as the network would.
	for _, a := range r.gen.Accounts() {
		r.world.Reconnect(a)
	}

	settled, unsettled := r.settle(ctx)
	stopDisk()
	<-diskDone
	rep, err := audit.Check(ctx, r.st, r.truth())
	if err != nil {
		return rep, err
	}
	rep.PeakDownloadBytes, rep.PeakAccountDownloadBytes = disk.peaks()
	rep.DownloadBudgetBytes = r.o.DownloadBudget
	rep.DiskOverBudget = r.restarts == 0 && rep.PeakAccountDownloadBytes > max(rep.DownloadBudgetBytes, rep.LargestPackage)
	rep.Settled, rep.Unsettled = settled, unsettled
	rep.Restarts = r.restarts
	rep.Calls = r.world.TotalCalls()
	rep.Logouts = r.world.Logouts()
	if r.o.Inspect != nil {
		if err := r.o.Inspect(ctx, r.settled()); err != nil {
			return rep, err
		}
	}
	if r.o.RestoreBackup {
		first := rep
		if rep, err = r.restoreBackup(ctx, dumped); err != nil {
			return rep, err
		}
		rep.Calls = r.world.TotalCalls()
		rep.Restarts = r.restarts
		// The run passes only if the audits before and after the restore
		// both do.
		if !first.OK() {
			rep.MissingNames = append(rep.MissingNames, "the audit before the restore failed")
			rep.Missing += max(first.Missing, 1)
			rep.DuplicateDeliveries += first.DuplicateDeliveries
		}
	}
	if r.o.IdleRestart {
		rc, err := r.idleRestart(ctx)
		if err != nil {
			return rep, err
		}
		rep.RestartCalls = rc
	}
	return rep, nil
}

// audit checks the catalogue and the destinations against the world.
func (r *runner) audit(ctx context.Context) (Report, error) {
	return audit.Check(ctx, r.st, r.truth())
}

func (r *runner) publish(ctx context.Context, published *atomic.Int64) {
	var every time.Duration
	if r.o.Rate > 0 {
		every = time.Duration(float64(time.Second) / r.o.Rate)
	}
	deadline := time.Now().Add(r.o.Duration)
	halfway := time.Now().Add(r.o.Duration / 2)
	next := time.Now()
	lost := r.o.LoseAccess <= 0
	for i := 0; ; i++ {
		if !lost && (r.o.Steps > 0 && i >= r.o.Steps/2 || r.o.Steps == 0 && !time.Now().Before(halfway)) {
			r.loseAccess()
			lost = true
		}
		if r.o.Steps > 0 && i >= r.o.Steps {
			return
		}
		if r.o.Steps == 0 && !time.Now().Before(deadline) {
			return
		}
		if every > 0 {
			next = next.Add(every)
			if d := time.Until(next); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		} else if ctx.Err() != nil {
			return
		}
		r.gen.Step()
		published.Add(1)
	}
}

func (r *runner) disconnects(ctx context.Context) {
	service.Ticks(ctx, r.o.DisconnectEvery, nil, func(context.Context) {
		for _, a := range r.gen.Accounts() {
			r.world.Disconnect(a, r.o.DisconnectEvery/4)
		}
	})
}

// settle waits until every queue is empty, no source is dirty, no set part
// is pending and the catalogue has stopped changing. When it gives up, it
// returns what its last look found still pending.
func (r *runner) settle(ctx context.Context) (bool, string) {
	deadline := time.Now().Add(r.o.SettleTimeout)
	stable := 0
	lastCount := -1
	var last string
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return false, "stopped: " + context.Cause(ctx).Error()
		}
		quiet := r.current() != nil
		// A source recorded inaccessible stays dirty behind its circuit.
		dirty := -r.recordedInaccessible(ctx)
		queued := 0
		for _, s := range r.current().Status() {
			dirty += s.Dirty
			queued += s.QueueDepth
		}
		if dirty > 0 || queued > 0 {
			quiet = false
		}
		pend, count, err := r.pendingAndCount(ctx)
		if err != nil || pend.total() > 0 {
			quiet = false
		}
		last = fmt.Sprintf("live queue %d, dirty sources %d, parts waiting for their set %d, dead letters due again %d, deliveries due %d",
			queued, dirty, pend.parts, pend.letters, pend.deliveries)
		if err != nil {
			last += "; the catalogue could not be read: " + err.Error()
		}
		if quiet && count == lastCount {
			stable++
		} else {
			stable = 0
		}
		lastCount = count
		if stable >= 4 {
			return true, ""
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false, last
}

// recordedInaccessible counts the sources that lost access and that the
// catalogue records as inaccessible.
func (r *runner) recordedInaccessible(ctx context.Context) int {
	lost, _ := r.faults()
	recorded, err := audit.RecordedInaccessible(ctx, r.st, lost)
	if err != nil {
		return 0
	}
	return len(recorded)
}

// faults returns the sources the fault knobs made inaccessible and those
// they protected.
func (r *runner) faults() (lost, protected []tg.ChatID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.lost {
		lost = append(lost, c)
	}
	for c := range r.protected {
		protected = append(protected, c)
	}
	return lost, protected
}

// truth is the world's ground truth for the audit.
func (r *runner) truth() audit.Truth {
	lost, protected := r.faults()
	return audit.FromWorld(r.world, r.gen, lost, protected, r.routes)
}

func (r *runner) progress(ctx context.Context, start time.Time, published int, publishedFor time.Duration) Progress {
	p := Progress{Elapsed: time.Since(start), Published: published, PublishedFor: publishedFor}
	if publishedFor == 0 {
		p.PublishedFor, p.Publishing = p.Elapsed, true
	}
	if d := r.current(); d != nil {
		for _, s := range d.Status() {
			p.Queue += s.QueueDepth
			p.Lag += s.Lag
			p.Dirty += s.Dirty
		}
	}
	r.mu.Lock()
	p.Restarts = r.restarts
	r.mu.Unlock()
	_ = r.st.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM packages),
		(SELECT count(*) FROM source_messages WHERE outcome = 'duplicate'),
		(SELECT count(*) FROM dead_letters WHERE state <> 'resolved')`).Scan(&p.Catalogued, &p.Duplicates, &p.DeadLetter)
	return p
}

// MetricsHandler serves the registry most recently handed to set.
func MetricsHandler() (http.Handler, func(prometheus.Gatherer)) {
	var cur atomic.Pointer[prometheus.Gatherer]
	empty := prometheus.Gatherer(prometheus.NewRegistry())
	cur.Store(&empty)
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		promhttp.HandlerFor(*cur.Load(), promhttp.HandlerOpts{}).ServeHTTP(w, req)
	})
	return h, func(g prometheus.Gatherer) { cur.Store(&g) }
}
