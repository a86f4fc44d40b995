package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/ingest"
	"stashd/internal/service"
	"stashd/reconcile"
	"stashd/store"
	"stashd/tg"
)

// rewindInterval is how often an account checks whether the database it
// writes to was failed over or restored, and takes up reconciliations
// asked for meanwhile (by another account, instance or `stashd
// reconcile`).
const rewindInterval = 10 * time.Second

// rewindWatch keeps an account from sending second copies after the
// catalogue rewound (see package reconcile). At start, before the account
// delivers anything, it checks the database's identity and, where a
// destination holds a message newer than the catalogue records there, its
// newest page of history; a changed identity, or a copy of
// stashd's there that the catalogue does not know, asks for the
// destinations to be reconciled. Then, every rewindInterval, it checks the
// identity again (a failover while running) and runs the reconciliations
// waiting for its destinations. The delivery stage holds a destination's
// deliveries while its reconciliation waits (Hold).
type rewindWatch struct {
	d     *Daemon
	r     *accountRun
	dests []tg.ChatID
	log   *slog.Logger
	run   service.Runner
	// checked is closed once the start-up check is done: until then the
	// delivery stage cannot tell whether a destination is held.
	checked chan struct{}
	// unrecorded are the watched sources a rewound catalogue had no row
	// of and that could not be registered again, said once each
	// (reloadSources, from the watch's loop and from the delivery
	// stage's Hold).
	mu         sync.Mutex
	unrecorded map[tg.ChatID]bool
	// finished is when each destination's reconciliation last finished,
	// as runOnce last saw it (its loop's alone).
	finished map[tg.ChatID]time.Time
}

// firstUnrecorded reports whether chat was not yet found unrecorded.
func (w *rewindWatch) firstUnrecorded(chat tg.ChatID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := !w.unrecorded[chat]
	w.unrecorded[chat] = true
	return first
}

func newRewindWatch(d *Daemon, r *accountRun, dests []tg.ChatID) *rewindWatch {
	return &rewindWatch{d: d, r: r, dests: dests, log: r.log.With("component", "reconcile"), checked: make(chan struct{}),
		unrecorded: map[tg.ChatID]bool{}, finished: map[tg.ChatID]time.Time{}}
}

// Start checks for a rewind, then runs the loop.
func (w *rewindWatch) Start(ctx context.Context) error {
	return w.run.StartFunc(ctx, func(ctx context.Context) {
		w.startCheck(ctx)
		close(w.checked)
		service.Every(ctx, rewindInterval, nil, w.runOnce)
	})
}

// Stop stops the loop; a reconciliation cut short runs again later.
func (w *rewindWatch) Stop() { w.run.Stop() }

// Hold reports whether sends to dest must wait for its reconciliation;
// pending is what the catalogue said just before (in the delivery lock's
// round trip), and mark the checkMark taken before that round trip. It
// waits for the start-up check first, and then reads the catalogue again,
// since the check may have asked for reconciliations. So it does when an
// identity check (this account's or another's, the periodic one or one a
// failover started in another delivery) ran since mark, or ran at mark,
// having waited for the checks under way to end: pending may have been
// read before such a check asked for the destination's reconciliation.
//
// A failover under a running daemon is noticed on the first new
// connection to the promoted server (store.ServerChanged): the lock's
// round trip opened it, so the identity is checked now, before the
// delivery goes, and a rewound catalogue asks for its reconciliations
// before anything is sent.
func (w *rewindWatch) Hold(ctx context.Context, dest tg.ChatID, pending bool, mark int64) (bool, error) {
	fresh := true
	select {
	case <-w.checked:
	default:
		fresh = false
		select {
		case <-w.checked:
		case <-ctx.Done():
			return true, context.Cause(ctx)
		}
	}
	if w.d.store.ServerChanged() {
		if err := w.checkIdentity(ctx); err != nil {
			// Not known yet whether the catalogue rewound: the delivery
			// is held (checkIdentity logged why), as a destination
			// waiting for its reconciliation is, not deferred as a failed
			// attempt, and the next one checks again.
			return true, nil
		}
		fresh = false
	}
	if fresh && !w.d.checkedSince(mark) {
		return pending, nil
	}
	return w.d.store.ReconcilePending(ctx, dest)
}

// countedCheck runs store.CheckIdentity, counted and read-holding
// d.checking, so that a delivery's Hold can tell a check ran since its
// lock's round trip read the destination's state, and wait for it
// (checkedSince).
func (d *Daemon) countedCheck(ctx context.Context, dests []tg.ChatID) (string, error) {
	d.checking.RLock()
	defer d.checking.RUnlock()
	d.checksStarted.Add(1)
	defer d.checksEnded.Add(1)
	return d.store.CheckIdentity(ctx, dests...)
}

// checkMark marks a moment for checkedSince: the identity checks started
// by then, or -1 when one was under way.
func (d *Daemon) checkMark() int64 {
	ended := d.checksEnded.Load()
	if started := d.checksStarted.Load(); started == ended {
		return started
	}
	return -1
}

// checkedSince waits for the identity checks under way to end, and
// reports whether one ran since mark (checkMark), or was under way then.
func (d *Daemon) checkedSince(mark int64) bool {
	d.checking.Lock()
	defer d.checking.Unlock()
	return mark < 0 || d.checksStarted.Load() != mark
}

// startCheck asks for reconciliations when the database changed or a
// destination's newest page of history holds copies the catalogue has no
// sent record of (a restore the catalogue cannot tell). The identity check
// is tried until it goes through; other errors are logged, and a
// destination that could not be read is checked at the next start.
//
// The page is read only for a destination whose newest message (getChat,
// answered from TDLib's own chat cache) is newer than every message the
// catalogue records there: a restart over a current catalogue costs no
// request to Telegram's servers but the difference each openChat below
// starts.
//
// getChat and the page answer from the session's own view of the
// destination, which misses what other sessions sent there while this
// one did not follow it: every destination is opened first, and each is
// read once its difference is in (tg.Views), all of them waited for
// together.
func (w *rewindWatch) startCheck(ctx context.Context) {
	// Until a check goes through nothing tells whether the catalogue was
	// restored: the deliveries wait for it (Hold waits for checked).
	for wait := time.Second; w.checkIdentity(ctx) != nil; wait = min(2*wait, rewindInterval) {
		if !service.Sleep(ctx, wait) {
			return
		}
	}
	for _, dest := range w.dests {
		if _, err := w.r.views.Open(ctx, dest); err != nil && ctx.Err() == nil {
			w.log.Warn("open a destination", "destination", dest, "err", err)
		}
	}
	for _, dest := range w.dests {
		if ctx.Err() != nil {
			return
		}
		if w.catalogueCurrent(ctx, dest) {
			continue
		}
		if ctx.Err() != nil {
			return // stopped while waiting for the destination's difference
		}
		lost, err := w.newestCopies(ctx, dest)
		if err != nil {
			w.log.Warn("check a destination's newest copies against the catalogue", "destination", dest, "err", err)
			continue
		}
		if lost == 0 {
			continue
		}
		reason := fmt.Sprintf("the catalogue is behind the destination: %d of its newest copies have no sent record", lost)
		w.log.Warn("catalogue behind a destination; reconciling it before sending", "destination", dest, "copies_without_record", lost)
		if err := w.d.store.RequestReconcile(ctx, []tg.ChatID{dest}, reason); err != nil {
			w.log.Warn("ask for a reconciliation", "destination", dest, "err", err)
		}
	}
}

// checkIdentity asks for every destination to be reconciled when the
// database server's identity changed since the catalogue last recorded it:
// those the catalogue records deliveries in and every running account's,
// asked for in the commit that records the new identity. It returns the
// check's error, logged.
func (w *rewindWatch) checkIdentity(ctx context.Context) error {
	dests := slices.Clone(w.dests)
	w.d.mu.Lock()
	for _, r := range w.d.accounts {
		if r.rewind == nil {
			continue
		}
		for _, dest := range r.rewind.dests {
			if !slices.Contains(dests, dest) {
				dests = append(dests, dest)
			}
		}
	}
	w.d.mu.Unlock()
	reason, err := w.d.countedCheck(ctx, dests)
	if ferr := w.d.store.IDMoveFailure(); ferr != nil {
		w.log.Error("a new package may take the id of one another instance still holds from the old server; "+
			"grant this role UPDATE on the packages id sequence", "err", ferr)
	}
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("check the database's identity", "err", err)
		}
		return err
	}
	if reason != "" {
		w.log.Warn("the catalogue may have rewound; reconciling every destination before sending", "reason", reason)
	}
	w.reloadSources(ctx)
	return nil
}

// reloadSources gives every running account's listener the state of each
// source it read before the catalogue's era ended (a change of server, a
// rewind a check named: listener.Behind) as the catalogue has it now, each
// marked dirty: the messages the catalogue forgot are then read again by
// catch-up, instead of lying below a watermark only the process's memory
// still holds. Until then the listener's writes of those sources are
// refused (store.ErrRewound); a reload that fails is tried again after the
// next check. Nothing is read when no source is behind. A source the
// restored catalogue records under another account (a dump older than a
// takeover) is read by its id, as the listener watched it; one it does not
// record at all is registered again (registerAgain).
func (w *rewindWatch) reloadSources(ctx context.Context) {
	w.d.mu.Lock()
	runs := slices.Clone(w.d.accounts)
	w.d.mu.Unlock()
	for _, r := range runs {
		behind := r.lst.Behind(w.d.store.Era())
		if len(behind) == 0 {
			continue
		}
		srcs, err := w.d.store.Sources(ctx, r.name)
		if err != nil {
			w.log.Warn("reload the sources' watermarks after a rewind", "account", r.name, "err", err)
			continue
		}
		for _, s := range srcs {
			if i := slices.Index(behind, s.ChatID); i >= 0 {
				r.lst.Watch(s)
				behind = slices.Delete(behind, i, i+1)
			}
		}
		for _, chat := range behind {
			s, err := w.d.store.GetSource(ctx, chat)
			switch {
			case errors.Is(err, store.ErrNotFound):
				s, err := w.registerAgain(ctx, r, chat)
				if err != nil {
					// Behind still: tried again after the next check.
					if w.firstUnrecorded(chat) {
						w.log.Error("the restored catalogue does not record a watched source, and registering it again failed; tried again after the next check",
							"account", r.name, "source", chat, "err", err)
					}
					continue
				}
				w.log.Warn("the restored catalogue did not record a watched source; registered again, it catches up from its history policy",
					"account", r.name, "source", chat, "from_message", s.Watermark)
				r.lst.Watch(s)
			case err != nil:
				w.log.Warn("reload a source's watermark after a rewind", "account", r.name, "source", chat, "err", err)
			default:
				r.lst.Watch(s)
			}
		}
	}
}

// registerAgain registers chat, a source r watches that the rewound
// catalogue does not record (a dump taken before it was added), as a
// start registers a new source: from its history policy, but never from
// past the low watermark the listener knew before the rewind, so that what
// was posted meanwhile is read. Its packages catalogued after the dump are
// read again by catch-up; their copies in the destinations are found by
// the reconciliation the rewind asked for, not sent twice.
func (w *rewindWatch) registerAgain(ctx context.Context, r *accountRun, chat tg.ChatID) (store.Source, error) {
	low, _, _ := r.lst.Watermark(chat)
	if err := w.d.registerNew(ctx, r, chat, r.histories, low); err != nil {
		return store.Source{}, err
	}
	// Read back: another instance may have registered it meanwhile.
	return w.d.store.GetSource(ctx, chat)
}

// catalogueCurrent reports whether the catalogue records dest's newest
// message, or one newer: nothing can have been sent there that it forgot.
// An unknown newest message, or an error, counts as not current.
func (w *rewindWatch) catalogueCurrent(ctx context.Context, dest tg.ChatID) bool {
	if err := w.r.views.Current(ctx, dest); err != nil {
		return false
	}
	c, err := w.r.paced.GetChat(ctx, dest)
	if err != nil || c.LastMessageID == 0 {
		return false
	}
	known, err := w.d.store.NewestRecorded(ctx, dest)
	if err != nil {
		w.log.Warn("read the newest message the catalogue records in a destination", "destination", dest, "err", err)
		return false
	}
	return known != 0 && c.LastMessageID <= known
}

// newestCopies counts the copies of stashd's on dest's newest page of
// history that the catalogue has no sent record of.
func (w *rewindWatch) newestCopies(ctx context.Context, dest tg.ChatID) (int, error) {
	page, err := w.r.paced.GetChatHistory(ctx, dest, 0, tg.MaxSearchLimit)
	if err != nil {
		return 0, err
	}
	lost := 0
	for _, m := range page {
		tok := ingest.TokenOf(m.Caption)
		if tok == "" || m.Document == nil || !m.ID.IsServer() {
			continue
		}
		rec, err := w.d.store.ClassifyCopy(ctx, store.CopyFound{Destination: dest, Message: m.ID, Token: tok,
			UniqueID: m.Document.File.UniqueID})
		if err != nil {
			return 0, err
		}
		if rec.Outcome.Recovered() {
			lost++
		}
	}
	return lost, nil
}

// runOnce checks the identity and runs the reconciliations waiting for the
// account's destinations, one destination at a time under a lock that
// spans accounts and instances. When one of them finished since its last
// look, whoever ran it, it wakes every account's delivery stage.
func (w *rewindWatch) runOnce(ctx context.Context) {
	_ = w.checkIdentity(ctx)
	waiting, err := w.d.store.Reconciles(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("list reconciliations", "err", err)
		}
		return
	}
	woke := false
	for _, rc := range waiting {
		if !slices.Contains(w.dests, rc.Destination) || ctx.Err() != nil {
			continue
		}
		if !rc.FinishedAt.IsZero() {
			// Finished since the last look (by another instance, perhaps):
			// the deliveries it held here go now, not at the delivery
			// stages' next look.
			if !w.finished[rc.Destination].Equal(rc.FinishedAt) {
				w.finished[rc.Destination] = rc.FinishedAt
				woke = true
			}
			continue
		}
		if err := w.reconcile(ctx, rc); err != nil && ctx.Err() == nil {
			w.log.Warn("reconcile a destination; trying again later", "destination", rc.Destination, "err", err)
		}
	}
	if woke {
		w.d.wakeDeliveries()
	}
}

func (w *rewindWatch) reconcile(ctx context.Context, rc store.Reconcile) error {
	lock, err := w.d.store.Lock(ctx, "r:"+strconv.FormatInt(int64(rc.Destination), 10))
	if err != nil {
		return err
	}
	defer lock.Unlock()
	lctx, unbind := lock.Bind(ctx)
	defer unbind()
	// Another account or instance may have done it while this one waited.
	if pending, err := w.d.store.ReconcilePending(lctx, rc.Destination); err != nil || !pending {
		return err
	}
	w.log.Info("reconciling a destination", "destination", rc.Destination, "reason", rc.Reason)
	start := time.Now()
	res, err := reconcile.Destination(lctx, reconcile.Config{Logger: w.log, Account: w.r.name, Views: w.r.views}, w.d.store, w.r.paced, rc.Destination)
	w.d.rewindM.recovered.Add(float64(res.Recovered))
	w.d.im.CopiesDeleted(w.r.name).Add(float64(res.Deleted))
	if errors.Is(err, reconcile.ErrGaveUp) {
		w.d.rewindM.gaveUp.Inc()
		w.log.Error("a destination's history cannot be read; its reconciliation is given up and sends to it resume "+
			"(a copy sent before the catalogue rewound may be sent again)",
			"destination", rc.Destination, "pages", res.Pages, "recovered", res.Recovered, "err", err)
		w.d.wakeDeliveries()
		return nil
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	w.log.Info("destination reconciled; sends resume", "destination", rc.Destination, "pages", res.Pages,
		"copies", res.Copies, "recovered", res.Recovered, "second_copies", res.Seconds, "deleted", res.Deleted, "took", time.Since(start).Round(time.Millisecond).String())
	w.d.wakeDeliveries()
	return nil
}

// wakeDeliveries wakes the delivery stage of every running account: a
// destination's reconciliation, run by one of them, held the deliveries
// of all that send there.
func (d *Daemon) wakeDeliveries() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.accounts {
		r.pipe.WakeDelivery()
	}
}

// rewindMetrics counts what reconciliations rebuilt, and those given up.
type rewindMetrics struct {
	recovered prometheus.Counter
	gaveUp    prometheus.Counter
}

func newRewindMetrics(reg prometheus.Registerer) *rewindMetrics {
	m := &rewindMetrics{
		recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stashd_deliveries_recovered_total",
			Help: "Delivery records rebuilt from copies found in the destinations after the catalogue rewound (a failover or a restore).",
		}),
	}
	m.gaveUp = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "stashd_reconciles_given_up_total",
		Help: "Reconciliations given up because the destination's history could not be read; sends to it resumed unchecked.",
	})
	reg.MustRegister(m.recovered, m.gaveUp)
	return m
}
