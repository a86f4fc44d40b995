package daemon

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/internal/service"
	"stashd/tg"
)

// backlogInterval is how often an instance refreshes the delivery
// backlog gauges of its accounts' destinations.
const backlogInterval = 15 * time.Second

// DefaultDrainAlert is the default of Config.DrainAlert.
const DefaultDrainAlert = time.Hour

// backlogMetrics are the delivery backlog's gauges: per destination (the
// configured ones: a label is never made from data) the deliveries due and
// the time to send them at the send budgets, the bound the alert
// StashdDeliveryBacklogDrainingSlowly compares that time with, and the
// deliveries held because no account may post there
// (StashdDestinationUnwritable).
type backlogMetrics struct {
	due        *prometheus.GaugeVec
	drain      *prometheus.GaugeVec
	alert      prometheus.Gauge
	unwritable *prometheus.GaugeVec
}

func newBacklogMetrics(reg prometheus.Registerer) *backlogMetrics {
	m := &backlogMetrics{
		due: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_delivery_backlog",
			Help: "Queued deliveries due now (not held for a route's window or put off after a failure), by destination, as the database shows them.",
		}, []string{"destination"}),
		drain: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_delivery_drain_seconds",
			Help: "Estimated seconds to send a destination's delivery backlog at the send budgets of the accounts holding it: its parts x 60 / their send_rate summed (0 with no backlog).",
		}, []string{"destination"}),
		alert: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stashd_delivery_drain_alert_seconds",
			Help: "The delivery_drain_alert setting: the drain time past which StashdDeliveryBacklogDrainingSlowly fires.",
		}),
		unwritable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_delivery_unwritable",
			Help: "Queued deliveries held because no account may post in the destination (every account refused write access), by destination, as the database shows them.",
		}, []string{"destination"}),
	}
	reg.MustRegister(m.due, m.drain, m.alert, m.unwritable)
	return m
}

// backlogGauges is one account's tick of the backlog gauges, every
// backlogInterval. The figures come from the database and cover every
// destination, so an instance reads them once an interval, at the tick of
// whichever of its accounts comes first (backlogShared.turn), and sets
// them for the destinations of all its accounts.
type backlogGauges struct {
	d   *Daemon
	r   *accountRun
	run service.Runner
}

func (b *backlogGauges) Start(ctx context.Context) error {
	return b.run.StartFunc(ctx, func(ctx context.Context) {
		service.Every(ctx, b.d.backlogEvery, nil, b.update)
	})
}

// Stop stops the refreshes; nil (an account whose start failed before it
// was built) does nothing.
func (b *backlogGauges) Stop() {
	if b != nil {
		b.run.Stop()
	}
}

// backlogShared is the instance's part of the backlog gauges: the
// destinations its accounts send to and when the figures were last read.
type backlogShared struct {
	mu    sync.Mutex
	dests map[tg.ChatID]bool
	last  time.Time
}

// watch adds dests to the destinations the instance's gauges cover.
func (s *backlogShared) watch(dests []tg.ChatID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dests == nil {
		s.dests = make(map[tg.ChatID]bool)
	}
	for _, d := range dests {
		s.dests[d] = true
	}
}

// turn reports whether the figures are to be read now: not when an
// account of the instance read them less than most of an interval ago
// (its ticks and the others' fall at different moments of the interval).
// It returns the destinations to set.
func (s *backlogShared) turn(now time.Time, every time.Duration) ([]tg.ChatID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && now.Sub(s.last) < every*9/10 {
		return nil, false
	}
	s.last = now
	return slices.Collect(maps.Keys(s.dests)), true
}

func (b *backlogGauges) update(ctx context.Context) {
	dests, ok := b.d.backlog.turn(time.Now(), b.d.backlogEvery)
	if !ok {
		return
	}
	backlog, err := b.d.store.DeliveryBacklog(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.r.log.Warn("read delivery backlog", "err", err)
		}
		return
	}
	unwritable, err := b.d.store.UnwritableDeliveries(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.r.log.Warn("count deliveries held for write access", "err", err)
		}
		return
	}
	for _, dest := range dests {
		var due, drain float64
		for _, x := range backlog {
			if x.Destination == int64(dest) {
				due, drain = float64(x.Deliveries), x.DrainSeconds
			}
		}
		label := strconv.FormatInt(int64(dest), 10)
		b.d.backlogM.due.WithLabelValues(label).Set(due)
		b.d.backlogM.drain.WithLabelValues(label).Set(drain)
		b.d.backlogM.unwritable.WithLabelValues(label).Set(float64(unwritable[int64(dest)]))
	}
}
