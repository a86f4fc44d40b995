package daemon

import (
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

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"

	"stashd/internal/proc"
	"stashd/store"
	"stashd/tg"
)

// DefaultLeaseTTL is an account lease's lifetime when Config.LeaseTTL is
// zero.
const DefaultLeaseTTL = 30 * time.Second

// leaseStore is what the lease loops need of the store (tests wrap it to
// make renewals fail, as a database out of reach or a paused process
// would).
type leaseStore interface {
	AcquireLeaseWith(ctx context.Context, account, owner string, ttl time.Duration, deadOwner string, cfg store.AccountConfig) (store.Acquired, bool, error)
	RenewLease(ctx context.Context, account, owner string, epoch int64, ttl time.Duration) (time.Time, error)
	ReleaseLease(ctx context.Context, account, owner string, epoch int64) error
	Lease(ctx context.Context, account string) (store.Lease, error)
	ReleaseAccountClaims(ctx context.Context, account, owner string) (int, error)
	RecordConfigMismatch(ctx context.Context, m store.ConfigMismatch, ttl time.Duration) error
	ClearConfigMismatches(ctx context.Context, account, holder, fingerprint string) error
}

// leaseMetrics are the account lease metrics.
type leaseMetrics struct {
	owned     *prometheus.GaugeVec
	failovers *prometheus.CounterVec
	ownerless *prometheus.GaugeVec
	mismatch  *prometheus.GaugeVec
}

func newLeaseMetrics(reg prometheus.Registerer) *leaseMetrics {
	m := &leaseMetrics{
		owned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_account_lease_owned",
			Help: "1 while this instance holds the account's lease (and runs its Telegram client), else 0.",
		}, []string{"account"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stashd_account_failovers_total",
			Help: "Times this instance took an account over from another instance whose lease was not released cleanly.",
		}, []string{"account"}),
		ownerless: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_account_lease_ownerless_seconds",
			Help: "Seconds since the account's lease lapsed or was released with nobody taking it (0 while someone holds it), as the database shows it.",
		}, []string{"account"}),
		mismatch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_config_mismatch",
			Help: "1 while this instance's configuration of the account (sources, topics, routes, destinations) differs from the one its lease holder wrote, else 0.",
		}, []string{"account"}),
	}
	reg.MustRegister(m.owned, m.failovers, m.ownerless, m.mismatch)
	return m
}

// LeaseEvent is a step of an account's lease, for tests and harnesses that
// check the ordering of ownership (Config.OnLease).
type LeaseEvent struct {
	// Kind is "acquired", "started" (the account's loops run under the
	// lease), "stopped" (the account's Telegram client is closed after the
	// lease was lost) or "released".
	Kind    string
	Account string
	Epoch   int64
	// At is when it happened, by this process's clock.
	At time.Time
}

// holding is one tenure of an account's lease: from an acquisition to its
// loss or release.
type holding struct {
	epoch int64
	// base and deadline make the local deadline a monotonic reading: the
	// time of the last successful renewal's sending plus ttl - margin. A
	// paused process finds it passed when it resumes.
	base     time.Time
	deadline atomic.Int64 // nanoseconds after base

	loseOnce sync.Once
	lostCh   chan struct{} // closed when the lease is lost
	mu       sync.Mutex
	cancel   context.CancelFunc // the account run's, cancelled on loss
	// loggedOut is closed when the account's session is logged out
	// remotely (logOut); outState is the authorization state that said so.
	logoutOnce sync.Once
	loggedOut  chan struct{}
	outState   string
	stop       chan struct{} // closed to end the renewals (release or shutdown)
	kept       chan struct{} // closed when the renewals ended
	run        *accountRun
}

func newHolding(epoch int64, sent time.Time, life time.Duration) *holding {
	h := &holding{epoch: epoch, base: sent, lostCh: make(chan struct{}), stop: make(chan struct{}), kept: make(chan struct{}),
		loggedOut: make(chan struct{})}
	h.deadline.Store(int64(life))
	return h
}

// gate refuses every Telegram request of the account once the lease is
// lost or its local deadline has passed (tg.PacedConfig.Gate).
func (h *holding) gate() error {
	select {
	case <-h.lostCh:
		return tg.ErrLeaseLost
	default:
	}
	if time.Since(h.base) >= time.Duration(h.deadline.Load()) {
		return tg.ErrLeaseLost
	}
	return nil
}

func (h *holding) deadlineAt() time.Time { return h.base.Add(time.Duration(h.deadline.Load())) }

// lose marks the lease lost and cancels the account's work in flight at
// once, before the lease loop stops the account: a worker does not retry,
// and records no dead letter for, what failed because the lease is gone
// (idempotent).
func (h *holding) lose() {
	h.loseOnce.Do(func() {
		close(h.lostCh)
		h.mu.Lock()
		cancel := h.cancel
		h.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	})
}

// cancelOnLoss makes lose cancel the account run's context.
func (h *holding) cancelOnLoss(cancel context.CancelFunc) {
	h.mu.Lock()
	h.cancel = cancel
	h.mu.Unlock()
	if h.lost() {
		cancel()
	}
}

// logOut tells the leaser that the account's session was logged out
// remotely (idempotent): it stops the account and releases the lease.
func (h *holding) logOut(state string) {
	h.logoutOnce.Do(func() {
		h.mu.Lock()
		h.outState = state
		h.mu.Unlock()
		close(h.loggedOut)
	})
}

func (h *holding) lost() bool {
	select {
	case <-h.lostCh:
		return true
	default:
		return false
	}
}

// leaser runs one account's lease: it acquires it (or stands by while
// another instance holds it), starts the account, renews the lease every
// ttl/3, and stops the account at once when the lease is lost.
type leaser struct {
	d    *Daemon
	a    Account
	log  *slog.Logger
	ttl  time.Duration
	life time.Duration // ttl - margin: how long a renewal keeps the lease locally
	// config is this instance's configuration of the account, written
	// with every acquisition; seen is the holder's configuration it was
	// last compared with, and recorded when a difference from it was last
	// recorded (compareConfig).
	config   store.AccountConfig
	seen     string
	recorded time.Time

	quit    chan struct{} // closed: acquire nothing more
	finish  chan struct{} // closed: end the tenure (after the account stopped)
	done    chan struct{}
	release atomic.Bool // on finish: release the lease (false: Kill)

	mu      sync.Mutex
	h       *holding // current tenure, nil while standing by
	started bool
	// loggedOut is set while the account is not logged in: the leaser
	// tries it again every LoginPoll rather than backing off.
	loggedOut atomic.Bool
	// startErr is why the account last failed to start after a takeover
	// (nil once it starts, or once another instance runs it): Ready
	// reports it.
	startErr atomic.Pointer[error]
}

func (d *Daemon) newLeaser(a Account) *leaser {
	ttl := d.cfg.LeaseTTL
	l := &leaser{
		d: d, a: a, log: d.log.With("account", a.Name), ttl: ttl, config: configFingerprint(d.cfg, a),
		// The margin covers the delay between the lease's expiry as the
		// database sees it and this process noticing its deadline.
		life: ttl - ttl/6,
		quit: make(chan struct{}), finish: make(chan struct{}), done: make(chan struct{}),
	}
	d.leaseM.owned.WithLabelValues(a.Name).Set(0)
	d.leaseM.failovers.WithLabelValues(a.Name)
	d.leaseM.mismatch.WithLabelValues(a.Name).Set(0)
	return l
}

func (l *leaser) current() *holding {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h
}

func (l *leaser) setCurrent(h *holding) {
	l.mu.Lock()
	l.h = h
	l.mu.Unlock()
}

// tryAcquire makes one attempt at the lease. It returns nil, nil when
// another live instance holds it. A taken lease is being renewed when it
// returns.
func (l *leaser) tryAcquire(ctx context.Context) (*holding, error) {
	me := l.d.cfg.Instance
	cur, err := l.d.leases.Lease(ctx, l.a.Name)
	if err != nil {
		return nil, err
	}
	dead := ""
	if cur.Owner != "" && cur.Owner != me && deadLocalOwner(cur.Owner) {
		dead = cur.Owner
	}
	sent := time.Now()
	a, ok, err := l.d.leases.AcquireLeaseWith(ctx, l.a.Name, me, l.ttl, dead, l.config)
	if err != nil {
		return nil, err
	}
	l.d.leaseM.ownerless.WithLabelValues(l.a.Name).Set(a.Ownerless().Seconds())
	if !ok {
		l.compareConfig(ctx, a.Lease)
		return nil, nil
	}
	h := newHolding(a.Epoch, sent, l.life)
	l.setCurrent(h)
	go l.keep(h)
	l.d.leaseM.owned.WithLabelValues(l.a.Name).Set(1)
	// The lease now carries this instance's configuration: nothing differs
	// from the holder's (tookConfig), as anyone told of the lease sees.
	l.d.leaseM.mismatch.WithLabelValues(l.a.Name).Set(0)
	failover := a.PrevOwner != "" && a.PrevOwner != me
	if failover {
		l.d.leaseM.failovers.WithLabelValues(l.a.Name).Inc()
	}
	l.d.leaseEvent("acquired", l.a.Name, a.Epoch)
	if failover {
		l.log.Warn("took the account over from an instance that did not release it", "previous_owner", a.PrevOwner,
			"previous_lease_until", a.PrevUntil, "epoch", a.Epoch)
	} else {
		l.log.Info("account lease taken", "epoch", a.Epoch)
	}
	l.tookConfig(ctx, a)
	// The lease is exclusive: claims on the account's sources held by
	// anyone else are a previous owner's (maybe paused, not dead), and
	// catch-up must not wait ten minutes for them to expire.
	if n, err := l.d.leases.ReleaseAccountClaims(ctx, l.a.Name, me); err != nil {
		l.log.Warn("release the previous owner's source claims", "err", err)
	} else if n > 0 {
		l.log.Info("released the previous owner's source claims", "sources", n)
	}
	return h, nil
}

// keep renews h every ttl/3 until it is stopped or lost. The lease is lost
// when a renewal finds it taken, or when the local deadline passes without
// a successful renewal (database out of reach, process paused): the
// account must stop before the lease can lapse on the database's side.
//
// Renewals run on the store's lease pool, which nothing else uses, so
// load on the main pool cannot starve them. Each attempt has its own
// deadline, ttl/6 (well inside the lease), and a failed one is tried
// again after ttl/12, so several attempts fit before the local deadline.
func (l *leaser) keep(h *holding) {
	defer close(h.kept)
	next := time.NewTimer(l.ttl / 3)
	defer next.Stop()
	expire := time.NewTimer(time.Until(h.deadlineAt()))
	defer expire.Stop()
	failures := 0
	for {
		select {
		case <-h.stop:
			return
		case <-h.lostCh:
			return
		case <-expire.C:
			if time.Now().Before(h.deadlineAt()) { // renewed meanwhile
				expire.Reset(time.Until(h.deadlineAt()))
				continue
			}
			l.log.Error("account lease not renewed in time; stopping the account", "epoch", h.epoch, "failed_renewals", failures)
			h.lose()
			return
		case <-next.C:
		}
		// A process resumed after a pause may see the renewal timer before
		// the expiry: the deadline decides, not the order of wake-ups.
		dl := h.deadlineAt()
		if !time.Now().Before(dl) {
			l.log.Error("account lease deadline passed; stopping the account", "epoch", h.epoch)
			h.lose()
			return
		}
		sent := time.Now()
		attempt := sent.Add(l.ttl / 6)
		if dl.Before(attempt) {
			attempt = dl
		}
		ctx, cancel := context.WithDeadline(context.Background(), attempt)
		_, err := l.d.leases.RenewLease(ctx, l.a.Name, l.d.cfg.Instance, h.epoch, l.ttl)
		cancel()
		switch {
		case err == nil:
			if failures > 0 {
				l.log.Info("account lease renewed again", "epoch", h.epoch, "failed_renewals", failures)
			}
			failures = 0
			h.deadline.Store(int64(sent.Sub(h.base) + l.life))
			if !expire.Stop() {
				select {
				case <-expire.C:
				default:
				}
			}
			expire.Reset(time.Until(h.deadlineAt()))
			next.Reset(l.ttl / 3)
		case errors.Is(err, store.ErrLeaseLost):
			l.log.Error("account lease taken by another instance; stopping the account", "epoch", h.epoch)
			h.lose()
			return
		default:
			failures++
			if failures == 1 {
				l.log.Warn("renew account lease; retrying", "err", err, "deadline_in", time.Until(dl).Round(time.Millisecond))
			}
			next.Reset(l.ttl / 12)
		}
	}
}

// end stops h's renewals and, when the lease is still held and release
// is set, releases it.
func (l *leaser) end(h *holding, release bool) {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	<-h.kept
	l.d.leaseM.owned.WithLabelValues(l.a.Name).Set(0)
	l.setCurrent(nil)
	if !release || h.lost() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
	defer cancel()
	if err := l.d.leases.ReleaseLease(ctx, l.a.Name, l.d.cfg.Instance, h.epoch); err != nil {
		l.log.Warn("release account lease", "err", err)
		return
	}
	l.d.leaseEvent("released", l.a.Name, h.epoch)
}

// loop is the leaser's goroutine. h is the tenure Prepare acquired (nil
// when the account was standing by).
func (l *leaser) loop(h *holding) {
	defer close(l.done)
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = l.ttl/3, 5*time.Minute, 0
	for {
		if h == nil {
			if l.loggedOut.Load() && !l.sleep(l.d.cfg.LoginPoll) {
				return
			}
			h = l.acquire()
			if h == nil {
				return
			}
			if err := l.start(h); err != nil {
				select {
				case <-l.quit: // the start was cut short by Shutdown or Kill
					l.end(h, l.release.Load())
					return
				default:
				}
				if errors.Is(err, tg.ErrNotLoggedIn) {
					// Still not logged in: tried again after LoginPoll,
					// the lease free meanwhile (reported once).
					l.d.recordAuth(l.a.Name, false, notLoggedInState(err), notLoggedInReason(l.a.Name))
					l.loggedOut.Store(true)
					l.end(h, true)
					h = nil
					continue
				}
				if !errors.Is(err, tg.ErrLeaseLost) { // not the account's fault
					l.startErr.Store(&err)
				}
				l.end(h, true)
				h = nil
				wait := b.NextBackOff()
				l.log.Error("account failed to start; lease released, retrying", "err", err, "in", wait)
				if !l.sleep(wait) {
					return
				}
				continue
			}
			l.startErr.Store(nil)
			l.loggedOut.Store(false)
			l.d.recordAuth(l.a.Name, true, "", "")
			b.Reset()
		}
		select {
		case <-h.loggedOut:
			l.stopLoggedOut(h)
			h = nil
			select {
			case <-l.quit:
				return
			default:
			}
		case <-h.lostCh:
			l.stopLost(h)
			h = nil
			select {
			case <-l.quit:
				return
			default:
			}
		case <-l.quit:
			// Shutdown or Kill stops the account; the lease is renewed
			// meanwhile, so a slow drain does not let it lapse.
			select {
			case <-h.lostCh:
				l.stopLost(h)
			case <-l.finish:
				l.end(h, l.release.Load())
			}
			return
		}
	}
}

// acquire tries for the lease every ttl/3 until it is taken (nil when the
// daemon stops first).
func (l *leaser) acquire() *holding {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	failures := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
		h, err := l.tryAcquire(ctx)
		cancel()
		switch {
		case err != nil:
			failures++
			if failures == 1 {
				l.log.Warn("acquire account lease", "err", err)
			}
		case h != nil:
			return h
		default:
			failures = 0
			l.startErr.Store(nil) // another instance runs the account
		}
		select {
		case <-l.quit:
			return nil
		case <-t.C:
		}
	}
}

var errClosing = errors.New("daemon is stopping")

// start starts the account under h after a takeover and publishes its run.
func (l *leaser) start(h *holding) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	waits, err := l.d.waitClientHold(ctx, l.a.Name, h)
	if err != nil {
		return fmt.Errorf("start account %s: %w", l.a.Name, err)
	}
	r, err := l.d.startAccount(ctx, l.a, h, waits)
	if err != nil {
		return fmt.Errorf("start account %s: %w", l.a.Name, err)
	}
	h.run = r
	l.d.mu.Lock()
	if l.d.closing {
		l.d.mu.Unlock()
		r.halt(false)
		return errClosing
	}
	if err := r.startLoops(l.d.fatal); err != nil {
		l.d.mu.Unlock()
		r.halt(false)
		return fmt.Errorf("start account %s: %w", l.a.Name, err)
	}
	l.d.accounts = append(l.d.accounts, r)
	l.d.mu.Unlock()
	r.log.Info("account started", "sources", r.sources, "epoch", h.epoch)
	l.d.leaseEvent("started", l.a.Name, h.epoch)
	return nil
}

// stopLost stops the account of a lost lease at once, the way Kill does:
// no drain, nothing written; what was in flight is found again by whoever
// holds the lease now.
func (l *leaser) stopLost(h *holding) {
	if f := l.d.beforeLostStop; f != nil {
		f(l.a.Name)
	}
	if r := h.run; r != nil {
		l.d.mu.Lock()
		for i, x := range l.d.accounts {
			if x == r {
				l.d.accounts = append(l.d.accounts[:i:i], l.d.accounts[i+1:]...)
				break
			}
		}
		l.d.mu.Unlock()
		r.halt(false)
	}
	l.d.leaseM.owned.WithLabelValues(l.a.Name).Set(0)
	l.d.leaseEvent("stopped", l.a.Name, h.epoch)
	l.end(h, false)
}

// stopLoggedOut stops the account whose session was logged out remotely,
// at once (its client answers nothing more), records why and releases the
// lease, so that another instance, or this one once the account is logged
// in again, takes it; what was in flight is found again then.
func (l *leaser) stopLoggedOut(h *holding) {
	h.mu.Lock()
	state := h.outState
	h.mu.Unlock()
	if r := h.run; r != nil {
		l.d.mu.Lock()
		for i, x := range l.d.accounts {
			if x == r {
				l.d.accounts = append(l.d.accounts[:i:i], l.d.accounts[i+1:]...)
				break
			}
		}
		l.d.mu.Unlock()
		r.halt(false)
	}
	l.d.recordAuth(l.a.Name, false, state, "the session was logged out remotely (terminated from another device, or the account banned): "+loginHint(l.a.Name))
	l.loggedOut.Store(true)
	l.d.leaseEvent("stopped", l.a.Name, h.epoch)
	l.end(h, true)
}

func (l *leaser) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.quit:
		return false
	case <-t.C:
		return true
	}
}

// run starts the leaser's goroutine once.
func (l *leaser) run() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return
	}
	l.started = true
	go l.loop(l.h)
}

// stopLeasers ends every leaser: no more acquisitions, then (once the
// accounts stopped) the end of every tenure, released when release is
// set. stopAccounts runs between the two.
func (d *Daemon) stopLeasers(release bool, stopAccounts func()) {
	d.mu.Lock()
	leasers := d.leasers
	d.leasers = nil
	d.mu.Unlock()
	for _, l := range leasers {
		l.release.Store(release)
		close(l.quit)
	}
	stopAccounts()
	for _, l := range leasers {
		l.mu.Lock()
		started, h := l.started, l.h
		l.mu.Unlock()
		close(l.finish)
		if started {
			<-l.done
			continue
		}
		// Prepared but never run: the tenure Prepare took ends here.
		if h != nil {
			l.end(h, release)
		}
	}
}

func (d *Daemon) leaseEvent(kind, account string, epoch int64) {
	if d.cfg.OnLease != nil {
		d.cfg.OnLease(LeaseEvent{Kind: kind, Account: account, Epoch: epoch, At: time.Now()})
	}
}

// deadLocalOwner reports whether owner ("host:pid", Config.Instance's
// default) is a process of this host that is gone: its claims and leases
// need not be waited for.
func deadLocalOwner(owner string) bool {
	host, _ := os.Hostname()
	h, p, ok := strings.Cut(owner, ":")
	if !ok || h != host {
		return false
	}
	pid, err := strconv.Atoi(p)
	return err == nil && pid > 0 && pid != os.Getpid() && !proc.Alive(pid)
}
