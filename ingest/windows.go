package ingest

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/internal/service"
	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// WindowStore is what the window sender reads and writes.
type WindowStore interface {
	DueWaiting(ctx context.Context, account string, now time.Time, limit int) ([]store.Waiting, error)
	AllWaiting(ctx context.Context, account string) ([]store.Waiting, error)
	ClearWaiting(ctx context.Context, pkg int64, dest tg.ChatID) error
	WaitDelivery(ctx context.Context, w store.Waiting) error
	GetPackage(ctx context.Context, id int64) (store.Package, error)
	Lock(ctx context.Context, name string) (*store.Lock, error)
	RecordWindowReport(ctx context.Context, r store.WindowReport) error
}

// WindowConfig configures a WindowSender.
type WindowConfig struct {
	// Interval between looks for deliveries whose window has opened; zero
	// means 30 s.
	Interval time.Duration
	// Batch is the most waiting deliveries read at a time; zero means 100.
	Batch int
	// SendSpacing is the account's time per send (60 s / send budget per
	// minute), to estimate how long a backlog takes; zero means 3 s.
	SendSpacing time.Duration
}

// WindowMetrics exports the delivery windows' state.
type WindowMetrics struct {
	open    *prometheus.GaugeVec
	opens   *prometheus.GaugeVec
	closes  *prometheus.GaugeVec
	waiting *prometheus.GaugeVec
	backlog *prometheus.GaugeVec
}

// NewWindowMetrics registers the delivery window metrics on reg.
func NewWindowMetrics(reg prometheus.Registerer) *WindowMetrics {
	m := &WindowMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_route_window_open",
			Help: "1 while the route's delivery window is open, 0 while its deliveries wait.",
		}, []string{"route"}),
		opens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_route_window_opens_timestamp_seconds",
			Help: "When the route's delivery window next opens (now while it is open).",
		}, []string{"route"}),
		closes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_route_window_closes_timestamp_seconds",
			Help: "When the route's delivery window next closes.",
		}, []string{"route"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_deliveries_waiting",
			Help: "Package deliveries waiting for the route's delivery window, by account and route.",
		}, []string{"account", "route"}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_route_window_backlog_seconds",
			Help: "Time the account's send budget needs for the parts waiting for the route's window.",
		}, []string{"account", "route"}),
	}
	reg.MustRegister(m.open, m.opens, m.closes, m.waiting, m.backlog)
	return m
}

// WindowSender delivers what waits for delivery windows once they open,
// and keeps the window metrics. A window that closes with deliveries still
// waiting is recorded as partial (status shows it); they go in the next
// window, never dropped.
type WindowSender struct {
	cfg   WindowConfig
	p     *Pipeline
	store WindowStore
	m     *WindowMetrics
	run   service.Runner

	// open and sent are per route: the window state last seen and the
	// deliveries sent since it opened. Only RunOnce touches them.
	open map[string]bool
	sent map[string]int
}

// NewWindowSender returns the window loop of p's account. m may be nil.
func NewWindowSender(cfg WindowConfig, p *Pipeline, st WindowStore, m *WindowMetrics) *WindowSender {
	cfg.Interval = cmp.Or(cfg.Interval, 30*time.Second)
	cfg.Batch = cmp.Or(cfg.Batch, 100)
	cfg.SendSpacing = cmp.Or(cfg.SendSpacing, 3*time.Second)
	return &WindowSender{cfg: cfg, p: p, store: st, m: m, open: map[string]bool{}, sent: map[string]int{}}
}

// Start starts the loop; without windows or hand-overs it does nothing.
func (ws *WindowSender) Start(ctx context.Context) error {
	if !ws.p.cfg.Routes.HasWindows() && ws.p.cfg.HandOver == nil {
		return nil
	}
	// The window metrics exist from the start, not from the first look.
	routes := ws.p.cfg.Routes.Routes()
	ws.observe(routes)
	if _, _, err := ws.report(ctx, routes); err != nil {
		return err
	}
	return ws.run.StartFunc(ctx, func(ctx context.Context) {
		service.Every(ctx, ws.cfg.Interval, nil, func(ctx context.Context) {
			res, err := ws.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				ws.p.log.Warn("delivery windows", "err", err)
			}
			if res.Delivered > 0 || res.Partial > 0 {
				ws.p.log.Info("delivery windows", "delivered", res.Delivered, "still_waiting", res.Waiting, "partial_windows", res.Partial)
			}
		})
	})
}

// Stop stops the loop.
func (ws *WindowSender) Stop() { ws.run.Stop() }

// WindowResult counts what one RunOnce did.
type WindowResult struct {
	// Delivered counts waiting deliveries sent; Waiting those left;
	// Failed those given up because their source message is gone.
	Delivered, Waiting, Failed int
	// Partial counts windows found closed with deliveries still waiting.
	Partial int
}

// RunOnce sends the waiting deliveries whose window is open, oldest first,
// checking the window before each (a window may close mid-backlog), then
// updates the metrics and records windows that closed with a backlog.
func (ws *WindowSender) RunOnce(ctx context.Context) (WindowResult, error) {
	var res WindowResult
	routes := ws.p.cfg.Routes.Routes()
	ws.observe(routes) // windows that opened since the last look
	for {
		due, err := ws.store.DueWaiting(ctx, ws.p.cfg.Account, ws.p.cfg.Now(), ws.cfg.Batch)
		if err != nil {
			return res, err
		}
		progressed := false
		for _, w := range due {
			ok, err := ws.one(ctx, w)
			failed := err != nil && ctx.Err() == nil && tg.Classify(err) == tg.ClassPermanent
			if failed {
				// The package cannot be sent from its source any more (the
				// message is gone, the source lost): the hold ends with
				// its reason, and the rest of the backlog goes on.
				ws.p.log.Warn("waiting delivery cannot be sent; giving it up", "package", w.PackageID,
					"destination", w.Destination, "route", w.Route, "err", err)
				res.Failed++
				ok, err = true, ws.store.ClearWaiting(ctx, w.PackageID, w.Destination)
			}
			if err != nil {
				return res, err
			}
			if ok {
				progressed = true
			}
			if ok && !failed {
				res.Delivered++
				ws.sent[w.Route]++
			}
		}
		if !progressed || len(due) < ws.cfg.Batch {
			break
		}
	}
	partial, waiting, err := ws.report(ctx, routes)
	res.Partial, res.Waiting = partial, waiting
	return res, err
}

// one delivers w if its window is open now; otherwise it records the next
// opening. It reports whether w was delivered (or is no longer required).
func (ws *WindowSender) one(ctx context.Context, w store.Waiting) (bool, error) {
	p := ws.p
	pkg, err := ws.store.GetPackage(ctx, w.PackageID)
	if err != nil {
		return false, err
	}
	in := route.Package{Chat: w.Parts[0].Chat, Topic: w.Topic, Name: pkg.Name, Size: pkg.TotalSize}
	if !containsChat(p.destinations(in), w.Destination) {
		// No route sends it there any more: nothing was sent, nothing is
		// deleted; the hold simply ends.
		p.log.Info("waiting delivery no longer routed", "package", w.PackageID, "destination", w.Destination, "route", w.Route)
		return true, ws.store.ClearWaiting(ctx, w.PackageID, w.Destination)
	}
	open, opensAt, rt := p.cfg.Routes.Gate(in, w.Destination, p.cfg.Now())
	if !open {
		w.Route, w.OpensAt = rt, opensAt
		return false, ws.store.WaitDelivery(ctx, w)
	}
	parts := make([]tg.Message, len(w.Parts))
	for i, k := range w.Parts {
		m, err := p.tg.GetMessage(ctx, k.Chat, k.Message)
		if err != nil {
			return false, fmt.Errorf("fetch part %d of package %d (%s): %w", i, w.PackageID, k, err)
		}
		if m.Document == nil {
			return false, tg.Permanent(fmt.Errorf("part %d of package %d (%s) is no document any more", i, w.PackageID, k))
		}
		parts[i] = m
	}
	lock, err := ws.store.Lock(ctx, "h:"+hex.EncodeToString(pkg.ContentHash))
	if err != nil {
		return false, err
	}
	defer lock.Unlock()
	if _, err := p.deliver(ctx, pkg, parts); err != nil {
		return false, err
	}
	return true, nil
}

func containsChat(list []tg.ChatID, c tg.ChatID) bool {
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}

// observe notes the windows that opened since the last look, starting
// their count of deliveries sent.
func (ws *WindowSender) observe(routes []route.Route) {
	now := ws.p.cfg.Now()
	for i, r := range routes {
		if r.Window == nil {
			continue
		}
		name := r.Title(i)
		open := r.Window.Open(now)
		if open && !ws.open[name] {
			ws.sent[name] = 0
		}
		ws.open[name] = open
	}
}

// report updates the window metrics and records each window found closed
// (since the last look) with deliveries still waiting for it.
func (ws *WindowSender) report(ctx context.Context, routes []route.Route) (partial, waiting int, err error) {
	all, err := ws.store.AllWaiting(ctx, ws.p.cfg.Account)
	if err != nil {
		return 0, 0, err
	}
	count, parts := map[string]int{}, map[string]int{}
	for _, w := range all {
		count[w.Route]++
		parts[w.Route] += w.PartCount
	}
	now := ws.p.cfg.Now()
	for i, r := range routes {
		if r.Window == nil {
			continue
		}
		name := r.Title(i)
		open := r.Window.Open(now)
		if ws.m != nil {
			acct := ws.p.cfg.Account
			ws.m.open.WithLabelValues(name).Set(float64(b2i(open)))
			ws.m.opens.WithLabelValues(name).Set(float64(r.Window.NextOpen(now).Unix()))
			closes := r.Window.NextClose(now)
			if closes.IsZero() {
				closes = now.Add(24 * time.Hour) // open all day: not within a day
			}
			ws.m.closes.WithLabelValues(name).Set(float64(closes.Unix()))
			ws.m.waiting.WithLabelValues(acct, name).Set(float64(count[name]))
			ws.m.backlog.WithLabelValues(acct, name).Set((time.Duration(parts[name]) * ws.cfg.SendSpacing).Seconds())
		}
		if ws.open[name] && !open && count[name] > 0 {
			partial++
			rep := store.WindowReport{Route: name, Account: ws.p.cfg.Account, Window: r.Window.String(),
				ClosedAt: lastClose(r.Window, now), Sent: ws.sent[name], Waiting: count[name]}
			if err := ws.store.RecordWindowReport(ctx, rep); err != nil {
				return partial, len(all), err
			}
			ws.p.log.Warn(PartialSentence(rep, r.Window.NextOpen(now)))
		}
		ws.open[name] = open
	}
	return partial, len(all), nil
}

// lastClose is the most recent closing of w at or before now.
func lastClose(w *route.Window, now time.Time) time.Time {
	next := w.NextClose(now.Add(-24 * time.Hour))
	if next.IsZero() {
		return now // open all day: never closes
	}
	for {
		after := w.NextClose(next.Add(time.Minute))
		if after.After(now) {
			return next
		}
		next = after
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// PartialSentence says, for people, that a window closed before its
// backlog was delivered, and what to do about it.
func PartialSentence(r store.WindowReport, opens time.Time) string {
	hours := r.Window
	loc := time.UTC
	if w, err := route.ParseWindow(hours[:11], hours[12:]); err == nil {
		loc = w.Loc
	}
	s := "Delivery window " + hours + " of " + r.Route + " closed at " + r.ClosedAt.In(loc).Format("15:04") +
		" with " + strconv.Itoa(r.Waiting) + " deliveries still waiting (" + strconv.Itoa(r.Sent) + " delivered in it) for account " + r.Account + "."
	if !opens.IsZero() {
		s += " They resume when it opens at " + opens.In(loc).Format("Mon 15:04") + "."
	}
	return s + " This account is at capacity for this backlog: raise send_rate, let another account send, or widen the window."
}

// Open returns the window-open gauge of route (for tests).
func (m *WindowMetrics) Open(route string) prometheus.Gauge { return m.open.WithLabelValues(route) }

// Opens returns the next-opening gauge of route (for tests).
func (m *WindowMetrics) Opens(route string) prometheus.Gauge { return m.opens.WithLabelValues(route) }

// Waiting returns the waiting-deliveries gauge of account and route (for
// tests).
func (m *WindowMetrics) Waiting(account, route string) prometheus.Gauge {
	return m.waiting.WithLabelValues(account, route)
}
