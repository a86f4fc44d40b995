package ingest

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/route"
	"stashd/store"
)

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

// observe notes the windows that opened since the last look, starting
// their count of deliveries sent. A window that closed is left open here
// for report to find closed: a close while the stage was idle (its
// deliveries waiting out a flood wait) is reported as one in a pass.
func (ws *Deliverer) observe(routes []route.Route) {
	now := ws.p.cfg.Now()
	for i, r := range routes {
		if r.Window == nil {
			continue
		}
		name := r.Title(i)
		if r.Window.Open(now) && !ws.open[name] {
			ws.mu.Lock()
			ws.sent[name] = 0
			ws.mu.Unlock()
			ws.open[name] = true
		}
	}
}

// report updates the window metrics and records each window found closed
// (since the last look) with deliveries still waiting for it; waiting
// counts the account's queue. Without a windowed route it reads nothing
// (a round trip each pass of the stage, each delivery on the realtime
// path) and returns zeros. The count reads every queued delivery, the
// windows' backlogs included, so it is taken only when a window opened or
// closed since the last one, or an Interval after it (recount); between,
// waiting and the metrics are those of the last count.
func (ws *Deliverer) report(ctx context.Context, routes []route.Route) (partial, waiting int, err error) {
	if !ws.p.cfg.Routes.HasWindows() {
		return 0, 0, nil
	}
	if !ws.recount(routes) {
		return 0, ws.counted.waiting, nil
	}
	backlog, err := ws.store.QueuedByRoute(ctx, ws.p.cfg.Account)
	if err != nil {
		return 0, 0, err
	}
	count, parts := map[string]int{}, map[string]int{}
	for _, b := range backlog {
		count[b.Route] += b.Deliveries
		parts[b.Route] += b.Parts
		waiting += b.Deliveries
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
			ws.mu.Lock()
			sent := ws.sent[name]
			ws.mu.Unlock()
			rep := store.WindowReport{Route: name, Account: ws.p.cfg.Account, Window: r.Window.String(),
				ClosedAt: lastClose(r.Window, now), Sent: sent, Waiting: count[name]}
			if err := ws.store.RecordWindowReport(ctx, rep); err != nil {
				return partial, waiting, err
			}
			ws.p.log.Warn(PartialSentence(rep, r.Window.NextOpen(now)))
		}
		ws.open[name] = open
		ws.counted.open[name] = open
	}
	ws.counted.at, ws.counted.waiting = time.Now(), waiting
	return partial, waiting, nil
}

// recount reports whether report must count the queue again: it never
// did, its last count is an Interval old, or a window opened or closed
// since (in this pass, or since that count).
func (ws *Deliverer) recount(routes []route.Route) bool {
	c := &ws.counted
	if c.at.IsZero() || time.Since(c.at) >= ws.cfg.Interval {
		return true
	}
	now := ws.p.cfg.Now()
	for i, r := range routes {
		if r.Window == nil {
			continue
		}
		name := r.Title(i)
		if open := r.Window.Open(now); open != ws.open[name] || open != c.open[name] {
			return true
		}
	}
	return false
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
