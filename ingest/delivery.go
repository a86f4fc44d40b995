package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"stashd/internal/service"
	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// DeliveryStore is what the delivery stage reads and writes.
type DeliveryStore interface {
	DueWaiting(ctx context.Context, account string, now time.Time, limit int, except ...tg.ChatID) ([]store.Waiting, error)
	QueuedByRoute(ctx context.Context, account string) ([]store.RouteBacklog, error)
	DeferDelivery(ctx context.Context, pkg int64, dest tg.ChatID, at time.Time, cause string) error
	PutOffDelivery(ctx context.Context, pkg int64, dest tg.ChatID, at time.Time, cause string) error
	HoldDestination(ctx context.Context, account string, dest tg.ChatID, at time.Time, cause string) (int, error)
	NextPutOff(ctx context.Context, account string, now time.Time) (time.Time, bool, error)
	Lock(ctx context.Context, name string, reads ...store.Statement) (*store.Lock, error)
	LockAhead(name string, reads ...store.Statement) *store.LockAhead
	LookDelivery(pkg int64, dest tg.ChatID, p *store.Package, done, pending *bool, files *[]string) store.Statement
	RecordWindowReport(ctx context.Context, r store.WindowReport) error
}

// DeliveryConfig configures a Deliverer.
type DeliveryConfig struct {
	// Interval between looks at the queue when nothing wakes the stage (a
	// window opening); zero means 30 s. Ingest wakes it at once when it
	// queues a delivery, and a delivery put off (a flood wait, a failure)
	// when it falls due.
	Interval time.Duration
	// Batch is the most queued deliveries read at a time; it bounds the
	// stage's memory whatever the backlog. Zero means 100.
	Batch int
	// Lanes is how many destinations the stage sends to at once, each
	// destination's deliveries one at a time in queue order (lanes.go).
	// Zero means DefaultLanes.
	Lanes int
	// SendSpacing is the account's time per send (60 s / send budget per
	// minute), to estimate how long a backlog takes; zero means 3 s.
	SendSpacing time.Duration
	// RetryDelay is the first delay before a delivery that failed is tried
	// again (doubling per attempt, up to 30 min); a flood wait defers it
	// by its own length. Zero means 10 s.
	RetryDelay time.Duration
	// Hold, when set, is asked before each send whether sends to a
	// destination must wait (a reconciliation of it is pending after the
	// catalogue rewound); its deliveries then stay queued. pending is what
	// the catalogue said in the delivery lock's round trip, and mark what
	// HoldMark returned before that round trip; Hold may look again (after
	// a failover, or an identity check since mark). It may block until it
	// can tell.
	Hold func(ctx context.Context, dest tg.ChatID, pending bool, mark int64) (bool, error)
	// HoldMark, when set with Hold, marks the moment a delivery's lock
	// round trip reads whether its destination waits for a
	// reconciliation (Hold's mark).
	HoldMark func() int64
}

// Deliverer is an account's delivery stage: it sends the account's queued
// deliveries (written by ingest's hand-off, a route backfill, or another
// account's hand-over) oldest first, each once its route's window is open,
// at the account's send budget. It holds no database connection while it
// waits for a send turn or for Telegram: the queue is in PostgreSQL and it
// reads Batch rows at a time.
//
// A delivery that fails is deferred with backoff and the rest of the queue
// goes on; one that can never be sent (its source message gone, the source
// lost) leaves the queue with its reason logged; a destination no account
// may post in holds its deliveries until one may (holdUnwritable). A
// window that closes with deliveries still waiting is recorded as partial
// (status shows it); they go in the next window, never dropped.
type Deliverer struct {
	cfg   DeliveryConfig
	p     *Pipeline
	store DeliveryStore
	m     *WindowMetrics
	run   service.Runner

	// open and sent are per route: the window state last seen and the
	// deliveries sent since it opened. unwritable is the last hold of each
	// destination no account may post in (holdUnwritable). Only RunOnce
	// and its lanes touch them; the lanes under mu.
	open       map[string]bool
	sent       map[string]int
	unwritable map[tg.ChatID]time.Duration
	// putOff is when the first delivery put off falls due (zero: none),
	// as the queue last said; known while nothing since can have changed
	// it (untilPutOffDue). Only the stage's goroutine touches it.
	putOff struct {
		known bool
		at    time.Time
	}
	// counted is report's last count of the queue: when, each window's
	// state then, and the deliveries queued (recount). Only the stage's
	// goroutine touches it.
	counted struct {
		at      time.Time
		open    map[string]bool
		waiting int
	}
	// mu guards sent and unwritable, which the lanes of a run update.
	mu sync.Mutex
}

// deliveryLook is what a delivery reads in the round trip that takes its
// lock: its package, whether it is sent in full to its destination,
// whether the destination waits for a reconciliation, and the unique ids
// of the files known to carry its parts (a part read again from its
// source that still carries one of them needs no look of its own).
type deliveryLook struct {
	name    string
	pkg     store.Package
	done    bool
	pending bool
	files   []string
	attempt *store.LockAhead // when taken ahead
	// mark is DeliveryConfig.HoldMark's before the round trip that read
	// pending.
	mark int64
	// intents are the intents of the delivery's first send, written with
	// the lock taken ahead (nil when none were).
	intents *store.IntentsAhead
}

func newDeliveryLook(w store.Waiting) *deliveryLook {
	return &deliveryLook{name: "d:" + strconv.FormatInt(w.PackageID, 10) + ":" + strconv.FormatInt(int64(w.Destination), 10)}
}

func (l *deliveryLook) reads(st DeliveryStore, w store.Waiting) []store.Statement {
	return []store.Statement{st.LookDelivery(w.PackageID, w.Destination, &l.pkg, &l.done, &l.pending, &l.files)}
}

// NewDeliverer returns the delivery stage of p's account. m may be nil.
func NewDeliverer(cfg DeliveryConfig, p *Pipeline, st DeliveryStore, m *WindowMetrics) *Deliverer {
	cfg.Interval = cmp.Or(cfg.Interval, 30*time.Second)
	cfg.Batch = cmp.Or(cfg.Batch, 100)
	cfg.Lanes = cmp.Or(cfg.Lanes, DefaultLanes)
	cfg.SendSpacing = cmp.Or(cfg.SendSpacing, 3*time.Second)
	cfg.RetryDelay = cmp.Or(cfg.RetryDelay, 10*time.Second)
	ws := &Deliverer{cfg: cfg, p: p, store: st, m: m, open: map[string]bool{}, sent: map[string]int{},
		unwritable: map[tg.ChatID]time.Duration{}}
	ws.counted.open = map[string]bool{}
	return ws
}

// Start starts the stage's goroutine: it runs at once, then whenever
// ingest queues a delivery, when the first delivery put off falls due,
// and every Interval.
func (ws *Deliverer) Start(ctx context.Context) error {
	// The window metrics exist from the start, not from the first look.
	routes := ws.p.cfg.Routes.Routes()
	ws.observe(routes)
	if _, _, err := ws.report(ctx, routes); err != nil {
		return err
	}
	return ws.run.StartFunc(ctx, func(ctx context.Context) {
		tick := time.NewTicker(ws.cfg.Interval)
		defer tick.Stop()
		due := time.NewTimer(ws.cfg.Interval)
		defer due.Stop()
		settle := true
		for {
			if settle {
				// Sends a session could not settle (SettleStrays): at
				// the start and every Interval, one read.
				if n, err := ws.p.SettleStrays(ctx); err != nil && ctx.Err() == nil {
					ws.p.log.Warn("settle the sends noted for this account", "settled", n, "err", err)
				}
				settle = false
			}
			res, err := ws.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				ws.p.log.Warn("delivery stage", "err", err)
			}
			if res.Partial > 0 || res.Failed > 0 {
				attrs := []any{"delivered", res.Delivered, "failed", res.Failed, "partial_windows", res.Partial}
				if ws.p.cfg.Routes.HasWindows() {
					attrs = append(attrs, "still_waiting", res.Waiting) // counted for the windows
				}
				ws.p.log.Info("delivery stage", attrs...)
			}
			// A delivery put off is sent when it falls due, not up to an
			// Interval later: sends are the scarcest budget.
			due.Reset(ws.untilPutOffDue(ctx, res.Deferred > 0 || res.Held > 0))
			select {
			case <-ctx.Done():
				return
			case <-ws.p.wake:
			case <-due.C:
			case <-tick.C:
				settle = true
				ws.putOff.known = false // another account may have handed some over
			}
		}
	})
}

// minPutOffWake is the shortest wait untilPutOffDue gives, so that a
// delivery due in a moment costs one look, not a spin.
const minPutOffWake = 100 * time.Millisecond

// untilPutOffDue returns how long until the first delivery put off falls
// due, at most Interval (also when the read fails). It reads the queue
// only when what it knows may be stale: the run just put deliveries off
// (putOff), the time it knew has come, or the Interval's look; so a run
// that only sent, as on the realtime path, costs no read.
func (ws *Deliverer) untilPutOffDue(ctx context.Context, putOff bool) time.Duration {
	now := ws.p.cfg.Now()
	known := &ws.putOff
	if putOff || !known.known || !known.at.IsZero() && !now.Before(known.at) {
		at, ok, err := ws.store.NextPutOff(ctx, ws.p.cfg.Account, now)
		if err != nil {
			known.known = false
			return ws.cfg.Interval
		}
		known.known, known.at = true, time.Time{}
		if ok {
			known.at = at
		}
	}
	if known.at.IsZero() {
		return ws.cfg.Interval
	}
	return min(max(known.at.Sub(now), minPutOffWake), ws.cfg.Interval)
}

// Stop stops the stage; what is queued stays queued.
func (ws *Deliverer) Stop() { ws.run.Stop() }

// DeliveryResult counts what one RunOnce did.
type DeliveryResult struct {
	// Delivered counts queued deliveries sent; Waiting those left (counted
	// only when a route has a delivery window, for its report, and only
	// when a window opened or closed since the last count or an Interval
	// after it: between, the last count);
	// Failed those given up because their source message is gone;
	// Deferred those that failed and wait to be tried again; Held those
	// left queued because their destination waits for a reconciliation,
	// or for write access no account has there.
	Delivered, Waiting, Failed, Deferred, Held int
	// Partial counts windows found closed with deliveries still waiting.
	Partial int
}

// deferDelivery puts w off after a retryable failure: by the flood wait's
// length when Telegram asked for one (Telegram's pacing, not a failed
// attempt: it is not counted, so it neither lengthens the backoff of a
// later failure nor uses up the tries of a handed delivery), else by
// RetryDelay doubled per attempt (at most 30 min; for a spread delivery
// whose chosen account has not seen its parts, at most until the picking
// account's flood wait ends). The first failure of a delivery is logged.
func (ws *Deliverer) deferDelivery(ctx context.Context, w store.Waiting, cause error) error {
	if d, ok := tg.FloodWait(cause); ok {
		return ws.store.PutOffDelivery(ctx, w.PackageID, w.Destination, ws.p.cfg.Now().Add(d), cause.Error())
	}
	wait := min(ws.cfg.RetryDelay<<min(w.Attempts, 16), maxRetryDelay)
	var unseen *spreadUnseenError
	if errors.As(cause, &unseen) {
		// By then the picking account may send it itself.
		wait = min(wait, unseen.Paused)
	}
	if w.Attempts == 0 {
		ws.p.log.Warn("delivery failed; trying again later", "package", w.PackageID, "destination", w.Destination,
			"in", wait, "err", cause)
	}
	return ws.store.DeferDelivery(ctx, w.PackageID, w.Destination, ws.p.cfg.Now().Add(wait), cause.Error())
}

// putOffPaused puts off every delivery of the account's queue to w's
// destination, in one statement, when cause is a flood wait and no
// account that could send there may do so before it ends (destPause): a
// backlog to a paused destination then costs one write, not one per
// delivery, and none of them counts an attempt. It returns how many it
// put off (0 when cause is no such wait).
func (ws *Deliverer) putOffPaused(ctx context.Context, w store.Waiting, cause error) (int, error) {
	if _, ok := tg.FloodWait(cause); !ok {
		return 0, nil
	}
	wait := ws.p.destPause(w.Destination)
	if wait <= 0 {
		return 0, nil
	}
	return ws.store.HoldDestination(ctx, ws.p.cfg.Account, w.Destination, ws.p.cfg.Now().Add(wait), cause.Error())
}

// maxRetryDelay bounds the wait before a failed delivery, or a
// destination no account may post in, is tried again.
const maxRetryDelay = 30 * time.Minute

// holdUnwritable puts off w and the rest of the account's deliveries to
// its destination, which no account of the daemon may post in (cause
// wraps tg.ErrNoWriteAccess): by RetryDelay at first, doubled for each
// refusal in a row, at most maxRetryDelay. stashd does not follow the
// accounts' rights through TDLib's updates: the first delivery due after
// the hold tries again, so while the rights are missing the destination
// costs one refused send per hold, whatever its backlog, and nothing
// leaves the queue.
func (ws *Deliverer) holdUnwritable(ctx context.Context, w store.Waiting, cause error) error {
	ws.mu.Lock()
	last := ws.unwritable[w.Destination]
	wait := min(cmp.Or(2*last, ws.cfg.RetryDelay), maxRetryDelay)
	ws.unwritable[w.Destination] = wait
	ws.mu.Unlock()
	n, err := ws.store.HoldDestination(ctx, ws.p.cfg.Account, w.Destination, ws.p.cfg.Now().Add(wait), cause.Error())
	if err != nil {
		return err
	}
	if last == 0 {
		ws.p.log.Warn("no account may post in the destination; its deliveries wait for write access", "destination", w.Destination,
			"deliveries", n, "retry_in", wait, "err", cause)
	} else {
		ws.p.log.Debug("destination still refuses posts; deliveries held", "destination", w.Destination, "deliveries", n, "retry_in", wait)
	}
	return nil
}

// one delivers w if its window is open now; otherwise it records the next
// opening. It reports whether w left the queue.
//
// The delivery runs under the lock of its package and destination: a row
// lock, renewed while held, so the wait for a send turn holds no
// connection, and a second instance that runs the account after a
// takeover cannot send the same part at the same moment. The package and
// whether it is sent there in full are read in the lock's round trip, and
// the queue row goes in the commit that releases it. That commit also
// tries to take the lock of next, the delivery after it (with its looks),
// and, unless next's destination waits out a flood wait, writes the
// intents of next's first send under that lock: a backlog costs one round
// trip a delivery (its record, which prepares the next), not three.
func (ws *Deliverer) one(ctx context.Context, ln *lane, w store.Waiting, next *store.Waiting) (left bool, err error) {
	p := ws.p
	look := newDeliveryLook(w)
	lock, ahead := ln.claimAhead(look.name)
	end := &deliveryEnd{lock: lock}
	if ahead != nil {
		look = ahead
		end.setAhead(ahead.intents)
	}
	if wait := p.destPause(w.Destination); wait > 0 {
		// Nothing may be sent there before the wait ends: the delivery is
		// put off by it without loading its parts, which a delivery a
		// flood wait puts off again and again would load each time.
		if lock != nil {
			end.release(ctx)
		}
		return false, &tg.FloodWaitError{RetryAfter: wait,
			Err: fmt.Errorf("deliver package %d to %d: %w", w.PackageID, w.Destination, tg.ErrChatFloodWait)}
	}
	if lock == nil {
		look.mark = ws.holdMark()
		if lock, err = ws.store.Lock(ctx, look.name, look.reads(ws.store, w)...); err != nil {
			return false, err
		}
		end.lock = lock
	}
	defer func() {
		if givesUp(ctx, err) {
			// Given up, the delivery leaves the queue in the unit that
			// lets its lock go, and only while the lock is its own: a
			// holder that took it over may have sent some of it, and the
			// delivery is then left to it. A failed write leaves it
			// queued, deferred.
			var cleared bool
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if cerr := end.unlockWith(wctx, store.ClearWaitingUnder(end.lock, w.PackageID, w.Destination, &cleared)); cerr != nil {
				err = cerr
			} else if !cleared {
				err = fmt.Errorf("give up delivery of package %d to %d: %w", w.PackageID, w.Destination, store.ErrLockLost)
			}
			cancel()
		}
		end.release(ctx)
	}()
	pkg, done, pending := look.pkg, look.done, look.pending
	// The statements that end the delivery, with the attempt on next's
	// lock and the intents of next's first send when there is a next.
	ending := func(stmts ...store.Statement) []store.Statement {
		if next == nil || len(next.Parts) == 0 {
			return stmts
		}
		nl := newDeliveryLook(*next)
		nl.mark = ws.holdMark()
		nl.attempt = ws.store.LockAhead(nl.name, nl.reads(ws.store, *next)...)
		if p.destPause(next.Destination) == 0 {
			first := albums(len(next.Parts), p.albumsAllowed())[0]
			nl.intents = nl.attempt.WithIntents(ctx, next.PackageID, next.Destination, first.parts(), p.cfg.Account)
		}
		ln.ahead = nl
		return append(stmts, nl.attempt.Statements()...)
	}
	if ws.cfg.Hold != nil {
		// Asked before every delivery: a failover may come between two
		// of them.
		held, err := ws.cfg.Hold(ctx, w.Destination, pending, look.mark)
		if err != nil {
			return false, err
		}
		if held {
			return false, errHeld
		}
	}
	leave := func() (bool, error) {
		p.dropParts(w.PackageID, w.Parts)
		return true, end.unlockWith(ctx, ending(store.ClearWaitingStatement(w.PackageID, w.Destination))...)
	}
	if done {
		// Sent meanwhile (reconciled, recorded from an earlier session's
		// send, or a route's backfill): no send turn is taken.
		return leave()
	}
	in := route.Package{Chat: w.Parts[0].Chat, Topic: w.Topic, Name: pkg.Name, Size: pkg.TotalSize}
	if !containsChat(p.destinations(in), w.Destination) {
		// No route sends it there any more: nothing was sent, nothing is
		// deleted; the delivery simply leaves the queue.
		p.log.Info("queued delivery no longer routed", "package", w.PackageID, "destination", w.Destination, "route", w.Route)
		return leave()
	}
	if p.cfg.Routes.HasWindows() {
		open, opensAt, rt := p.cfg.Routes.Gate(in, w.Destination, p.cfg.Now())
		if !open {
			w.Route, w.OpensAt = rt, opensAt
			return false, end.unlockWith(ctx, ending(store.WaitDeliveryStatement(w))...)
		}
	}
	lctx, unbind := lock.Bind(ctx)
	defer unbind()
	// Other accounts and instances wait for the lock: its requests (the
	// parts' reads, the destination's history, its opening) do not sit
	// out a flood wait of this account but fail with it, and the delivery
	// is put off by the wait without the lock, as a send's 429 puts it off.
	lctx = tg.WithoutFloodWaits(lctx)
	// The delivery's last send, when it lands, clears the queue row and
	// lets the lock go in the commit that records it.
	end.stmts = ending(store.ClearWaitingStatement(w.PackageID, w.Destination))
	lctx = withDeliveryEnd(lctx, end)
	parts := make([]tg.Message, len(w.Parts))
	for i, k := range w.Parts {
		m, ok := p.queuedPart(w.PackageID, k)
		if !ok {
			var err error
			if m, err = p.loadPart(lctx, w.PackageID, i, k, look.files); err != nil {
				var unseen *notSeenError
				if errors.As(err, &unseen) && w.Attempts < unreadableTries {
					// Perhaps not in this session's view of the chat yet
					// (a delivery handed over by another account): tried
					// again later, as the view catches up; given up only
					// after as many tries as an unreadable source.
					return false, fmt.Errorf("deliver package %d to %d: %v", w.PackageID, w.Destination, err)
				}
				return ws.unreadable(lctx, w, in, err)
			}
		}
		parts[i] = m
	}
	// Every part of pkg exactly once to dest, through the account Spread
	// picks. Each send is preceded by an intent row holding a token that
	// the caption carries; an intent this delivery did not write may have
	// been sent by an attempt that crashed before recording it, so the
	// destination is searched for its token first and only an unfound part
	// is sent. A delivery handed to another account leaves its queue row to
	// that account.
	start := time.Now()
	_, handed, err := p.spreadDest(lctx, pkg, parts, in, w.Destination)
	p.m.observeStage(StageDeliver, start)
	if err != nil {
		return false, err
	}
	if handed || end.done {
		// The queue row is the other account's now, or was cleared with
		// the last send's record.
		p.dropParts(w.PackageID, w.Parts)
		return true, nil
	}
	return leave()
}

// holdMark is DeliveryConfig.HoldMark's mark, 0 without one.
func (ws *Deliverer) holdMark() int64 {
	if ws.cfg.HoldMark == nil {
		return 0
	}
	return ws.cfg.HoldMark()
}

// unreadable handles err, this account's failure to load a part of w.
// When the account cannot read the source (cannotRead) the delivery goes
// to another account that can, and may write to the destination
// (Pipeline.handOver). When none can: a delivery handed to this account
// by another, or taken from one that does not run (HandOverRoute, in a
// daemon of one account too), is deferred with errSourceUnreadable, as
// the account it came from may read the source and be stopped for now;
// after unreadableTries such attempts (about three hours at the default
// retry delay) it is given up, the source lost for every account. A
// delivery of the account's own source that no other account can read
// either is given up at once, as for a source lost.
func (ws *Deliverer) unreadable(ctx context.Context, w store.Waiting, in route.Package, err error) (bool, error) {
	p := ws.p
	if !cannotRead(err) || ctx.Err() != nil {
		return false, err
	}
	handed, herr := p.handOver(ctx, w.PackageID, w.Parts, in, w.Destination, false, err)
	switch {
	case herr != nil:
		return false, herr
	case handed:
		p.dropParts(w.PackageID, w.Parts)
		return true, nil
	case w.Route == HandOverRoute && w.Attempts < unreadableTries:
		// cause with %v: a 400 would make the whole error permanent.
		return false, fmt.Errorf("deliver package %d to %d: %w (%v)", w.PackageID, w.Destination, errSourceUnreadable, err)
	}
	return false, err
}

// unreadableTries is how many times a handed delivery whose source no
// running account can read is tried before it is given up.
const unreadableTries = 12

// claimAhead returns the lock taken ahead for the delivery of lock name,
// with its looks, or nils when none was; a lock taken ahead for another
// delivery (one skipped since) is let go, with the intents written with
// it.
func (ln *lane) claimAhead(name string) (*store.Lock, *deliveryLook) {
	a := ln.ahead
	ln.ahead = nil
	if a == nil {
		return nil, nil
	}
	l := a.attempt.Take()
	if l == nil || a.name != name {
		if l != nil {
			end := &deliveryEnd{lock: l}
			end.setAhead(a.intents)
			end.release(context.Background())
		}
		return nil, nil
	}
	return l, a
}

// givesUp reports whether one's err gives its delivery up: a permanent
// failure (the package cannot be sent from its source any more), not a
// held destination, one that refuses posts, a stop or an account no longer
// this instance's.
func givesUp(ctx context.Context, err error) bool {
	switch {
	case err == nil, errors.Is(err, errHeld), errors.Is(err, tg.ErrNoWriteAccess), ctx.Err() != nil,
		errors.Is(err, tg.ErrLeaseLost), errors.Is(err, store.ErrStaleEpoch):
		return false
	}
	return tg.Classify(err) == tg.ClassPermanent
}

// errHeld is one's answer for a delivery whose destination Hold holds: it
// stays queued.
var errHeld = errors.New("destination held")

// destPause is how long before a send to dest may go (Config.DestPause):
// a 429 there, or one that paused the account's sends.
func (p *Pipeline) destPause(dest tg.ChatID) time.Duration {
	if p.cfg.DestPause != nil {
		return p.cfg.DestPause(dest)
	}
	var d time.Duration
	if cp, ok := p.tg.(chatPauser); ok {
		d = cp.ChatPause(dest)
	}
	if sp, ok := p.tg.(sendPauser); ok {
		d = max(d, sp.SendPause())
	}
	return d
}

func containsChat(list []tg.ChatID, c tg.ChatID) bool {
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}
