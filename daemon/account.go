package daemon

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"stashd/catchup"
	"stashd/ingest"
	"stashd/listener"
	"stashd/rescan"
	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// accountRun is one account's running components.
type accountRun struct {
	name     string
	log      *slog.Logger
	client   tg.Client
	paced    *tg.Paced
	views    *tg.Views // the session's chats opened, for reads from the end
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
	late     *ingest.LateSends // the tokens of intents taken from accounts away
	backlog  *backlogGauges
	pauses   *pauseRecorder
	rewind   *rewindWatch
	follow   *upgradeFollower
	shared   *sharedWatch
	ctx      context.Context
	cancel   context.CancelFunc
	sources  int
	account  Account // with named sources resolved; only those it reads
	// histories are the account's history policies by chat, named
	// chats resolved at the start (resolveHistory).
	histories map[tg.ChatID]History
	// listed are the sources the configuration gives the account (named
	// ones resolved, upgrades followed, also those made while it runs),
	// those another account reads included. Guarded by Daemon.mu once the
	// account's loops run.
	listed []tg.ChatID
	// dests are the destinations the account's routes send to (every
	// configured one without routes).
	dests    []tg.ChatID
	routes   *route.Table
	haltOnce sync.Once
	// loggedOut is set when the session reports a remote logout: Health
	// no longer counts the account while its leaser stops it.
	loggedOut atomic.Bool
}

// halt stops the account's components after the drain (graceful, steps 3
// to 5 of Shutdown) or the way a crash would (cancel, close the Telegram
// client, stop the loops; nothing drained or written). Only the first call
// acts; a concurrent one waits for it.
func (r *accountRun) halt(graceful bool) {
	r.haltOnce.Do(func() {
		if graceful {
			r.shared.Stop() // it adds sources to catch-up and rescan
			r.follow.Stop()
			r.catch.Stop()
			r.resc.Stop()
			r.retry.Stop()
			r.backfill.Stop()
			r.deliver.Stop()
			r.backlog.Stop()
			r.rewind.Stop()
			r.pauses.Stop()
			r.sweep.Stop()
			r.cancel()
			r.rec.Stop()
			r.lst.Stop()
			if err := r.client.Close(); err != nil {
				r.log.Warn("close telegram client", "err", err)
			}
			<-r.sess.Done()
			r.pauses.wait()
			r.rec.NoteLeft()
			return
		}
		// The client first: from here on the account makes no request.
		r.cancel()
		_ = r.client.Close()
		r.pool.Stop()
		r.shared.Stop()
		r.follow.Stop()
		r.catch.Stop()
		r.resc.Stop()
		r.retry.Stop()
		r.backfill.Stop()
		r.deliver.Stop()
		r.backlog.Stop()
		r.rewind.Stop()
		r.pauses.Stop()
		r.sweep.Stop()
		r.rec.Stop()
		r.lst.Kill()
		<-r.sess.Done()
		r.pauses.wait()
		r.rec.NoteLeft()
	})
}

func (r *accountRun) startLoops(fatal chan<- error) error {
	// The backfill first: it records new routes before ingest delivers
	// anything under them, so its walk ends where routing at ingest starts.
	for _, s := range []interface{ Start(context.Context) error }{r.backfill, r.rec, r.lst, r.pool, r.sweep, r.catch, r.resc, r.retry, r.rewind, r.deliver, r.backlog, r.follow, r.shared, r.pauses} {
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
// every Telegram request is gated on h. waits are the flood waits an
// earlier run (or another instance) met that still run (recordedWaits):
// the account's first request waits for them. Its caller has waited for
// those that the TDLib client's start would break (clientHold).
func (d *Daemon) startAccount(ctx context.Context, a Account, h *holding, waits []store.FloodWait) (*accountRun, error) {
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

	r.pauses = &pauseRecorder{st: d.store, file: d.floodFiles[a.Name], account: a.Name, log: log}
	r.paced = tg.NewPaced(client, tg.PacedConfig{Account: a.Name, Rate: d.cfg.Rate, Gate: h.gate, OnPause: r.pauses.recordPaced}, d.tgm)
	r.views = tg.NewViews(r.paced.OpenChat, d.cfg.ViewSettle)
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
	unclaimed := ingest.NewUnclaimedSends()
	// So do the sends of an account away whose deliveries this account
	// took over, landed late: the session is told of them as new posts.
	r.late = ingest.NewLateSends()
	late := r.late
	lst := r.lst
	follow := newUpgradeFollower(d, r)
	r.follow = follow
	r.shared = &sharedWatch{d: d, r: r}
	r.sess = tg.NewSession(r.paced, func(u tg.Update) {
		switch u := u.(type) {
		case tg.SendSucceeded:
			unclaimed.Push(u.Message)
		case tg.NewMessage:
			if late.Claims(u.Message) {
				unclaimed.Push(u.Message)
			}
		case tg.ChatUpgraded:
			follow.offer(u)
		case tg.ChatAccessLost:
			r.views.AccessLost(u.Chat)
		case tg.ChatAccessHeld:
			r.views.AccessHeld(u.Chat)
		case tg.ConnectionStateChanged:
			r.views.Connection(u.State)
		case tg.LoggedOut:
			r.loggedOut.Store(true)
			log.Error("account logged out remotely; stopping it", "state", u.State, "fix", loginHint(a.Name))
			h.logOut(u.State)
		}
		lst.HandleUpdate(u)
	})
	r.sess.RecordChatPauses(r.pauses.recordChat)
	restorePauses(r, waits)
	r.sess.SendTimeout = d.cfg.SendTimeout
	r.sess.Silent = d.cfg.Silent
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
	// How long nothing watched the account (a restart, a logout): read
	// before this run's first status write. Edits made meanwhile reach no
	// update and lie below every watermark; a long enough absence is an
	// outage, which the rescan covers.
	away, wasRun, err := d.store.AccountAway(ctx, a.Name)
	if err != nil {
		return fail(err)
	}
	if err := d.store.UpsertAccount(ctx, a.Name, me.ID, me.IsPremium); err != nil {
		return fail(err)
	}
	// The budget this account sends at, for the backlog's drain estimates
	// (status, stashd_delivery_drain_seconds).
	if err := d.store.RecordSendRate(ctx, a.Name, d.cfg.SendRate); err != nil {
		return fail(err)
	}
	a, dests, accept, err := d.resolve(ctx, r, a)
	if err != nil {
		return fail(err)
	}
	histories, err := d.resolveHistory(ctx, r, a)
	r.histories = histories
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
	// supergroups, which are sources of their own by now: listed by every
	// account listing the group, whichever reads it.
	known, err := d.store.Sources(ctx, a.Name)
	if err != nil {
		return fail(err)
	}
	upgraded, err := d.store.Upgrades(ctx)
	if err != nil {
		return fail(err)
	}
	owned := map[tg.ChatID]bool{}
	for _, s := range known {
		owned[s.ChatID] = true
		if s.UpgradedTo != 0 {
			log.Info("source was upgraded to a supergroup; following it", "source", s.ChatID, "supergroup", s.UpgradedTo)
		}
	}
	a.Sources = followStoredUpgrades(a.Sources, upgraded)
	r.listed = a.Sources
	// A chat another account reads (registerSources) is not this
	// account's to open, watch, catch up or rescan.
	a.Sources = slices.DeleteFunc(slices.Clone(a.Sources), func(c tg.ChatID) bool { return !owned[c] })
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
	// A chat another account reads is opened too: the session's database
	// then keeps up with it, ready for the day this account takes it over.
	for _, chat := range r.listed {
		if _, err := r.views.Open(ctx, chat); err != nil {
			log.Warn("open chat failed; the source relies on catch-up", "source", chat, "err", err)
			r.lst.MarkDirty(chat, "open_failed")
		}
	}
	// A send of an account away this account took over before (in an
	// earlier run, or on another instance) may still land.
	if err := r.shared.resumeLate(ctx); err != nil {
		return fail(err)
	}

	icfg := d.cfg.Ingest
	icfg.Account, icfg.Destinations, icfg.Logger, icfg.Accept = a.Name, dests, d.log, accept
	icfg.Routes, icfg.Views = r.routes, r.views
	if len(d.cfg.Accounts) > 1 {
		icfg.HandOver = func(src, dest tg.ChatID, refused bool) (string, bool) { return d.handOver(a.Name, src, dest, refused) }
		icfg.Wrote = func(dest tg.ChatID) { d.wrote(a.Name, dest) }
		if d.cfg.SendRate > 0 {
			// With send budgets, any account that can write to a
			// destination sends there, the one with most room first.
			icfg.Spread = func(src, dest tg.ChatID, sends int) (*ingest.Pipeline, func()) {
				return d.spread.pick(a.Name, src, dest, sends)
			}
			icfg.DestPause = func(dest tg.ChatID) time.Duration { return d.spread.pause(a.Name, dest) }
		}
	}
	icfg.SourceSynced = func(chat tg.ChatID, upTo int64) bool {
		low, _, ok := lst.Watermark(chat)
		return ok && !lst.IsDirty(chat) && low >= upTo
	}
	icfg.InFlight = lst.InFlight
	icfg.AccessLost = func(chat tg.ChatID) { lst.MarkDirty(chat, listener.ReasonAccessLost) }
	icfg.SendScope = r.ctx
	icfg.LateSends = r.late
	workers := cmp.Or(d.cfg.Workers, 4)
	icfg.Downloads = cmp.Or(icfg.Downloads, workers)
	r.pipe = ingest.NewPipeline(icfg, d.store, r.sess, d.im)
	r.pool = ingest.NewPool(ingest.PoolConfig{Account: a.Name, Workers: workers, Logger: d.log}, r.lst, r.pipe, d.im)
	r.sweep = ingest.NewSetSweeper(r.pipe, 0, workers)
	ccfg := d.cfg.Catchup
	ccfg.Account, ccfg.Owner, ccfg.Sources, ccfg.Logger = a.Name, d.cfg.Instance, a.Sources, d.log
	// A backlog found by catch-up keeps catchupInFlight messages in flight
	// for each of its download slots (as many as the live queue has
	// workers, apart from them): most of a message's time is its lock's
	// and its catalogue's round trips, which hold no slot, and the more
	// catalogue units wait together, the more each group commit holds.
	ccfg.Parallel = cmp.Or(ccfg.Parallel, min(workers*catchupInFlight, maxCatchupInFlight))
	// A source the start could not open is opened by its next scan.
	ccfg.Open = func(ctx context.Context, chat tg.ChatID) error {
		_, err := r.views.Open(ctx, chat)
		return err
	}
	r.catch = catchup.New(ccfg, d.store, r.paced, r.lst, r.pipe.Backlog(), d.cm)
	rcfg := d.cfg.Rescan
	rcfg.Account, rcfg.Sources, rcfg.Logger = a.Name, a.Sources, d.log
	r.resc = rescan.New(rcfg, r.paced, d.store, r.pipe, d.rm)
	resc.Store(r.resc)
	if wasRun && r.resc.Outage(away) {
		log.Info("account was not watched for a while; its sources' recent documents are rescanned for edits made meanwhile",
			"away", away.Round(time.Second).String())
	}
	r.retry = ingest.NewRetrier(d.cfg.Retry, r.pipe, d.store, d.retm)
	r.backfill = ingest.NewBackfiller(d.cfg.Backfill, r.pipe, d.store)
	dcfg := d.cfg.Delivery
	if d.cfg.SendRate > 0 {
		dcfg.SendSpacing = time.Duration(float64(time.Minute) / d.cfg.SendRate)
	}
	if dcfg.Lanes == 0 && d.cfg.SendInFlight > 0 {
		// A lane more than the sends in flight: while every one of them
		// is sat out, a lane waits for the first turn that frees.
		dcfg.Lanes = d.cfg.SendInFlight + 1
	}
	r.rewind = newRewindWatch(d, r, dests)
	dcfg.Hold, dcfg.HoldMark = r.rewind.Hold, d.checkMark
	r.deliver = ingest.NewDeliverer(dcfg, r.pipe, d.store, d.wm)
	r.rec = ingest.NewSendRecorder(r.pipe, unclaimed)
	backlogDests := dests
	if r.routes.Routed() {
		backlogDests = r.routes.AllDestinations()
	}
	r.dests = backlogDests
	d.backlog.watch(backlogDests)
	r.backlog = &backlogGauges{d: d, r: r}

	return r, nil
}
