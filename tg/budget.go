package tg

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Clock is the time a SendBudget paces by. RealClock is the wall clock;
// tests and the pacing benchmark use a virtual one.
type Clock interface {
	Now() time.Time
	// SleepUntil waits until t, or until ctx ends (then false).
	SleepUntil(ctx context.Context, t time.Time) bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// SleepUntil implements Clock.
func (RealClock) SleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// VirtualClock is a Clock whose sleeps take no wall time: SleepUntil moves
// it forward to t at once (never back). Concurrent sleepers each move it to
// their own t, so the latest wake-up is when the last of them would have
// woken. Safe for concurrent use.
type VirtualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewVirtualClock returns a clock reading start.
func NewVirtualClock(start time.Time) *VirtualClock { return &VirtualClock{now: start} }

// Now implements Clock.
func (c *VirtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// SleepUntil implements Clock.
func (c *VirtualClock) SleepUntil(ctx context.Context, t time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
	return true
}

// SendBudgetConfig configures one account's send budget.
type SendBudgetConfig struct {
	// Account labels metrics.
	Account string
	// PerMinute is the most send requests the account makes per minute
	// (a sendMessage, or a sendMessageAlbum of up to ten documents, which
	// Telegram takes as one request); zero means 20. Sends are spaced
	// 60/PerMinute seconds apart, plus jitter.
	PerMinute float64
	// InFlight bounds the account's sends between sendMessage and their
	// outcome; zero means 3.
	InFlight int
	// Jitter varies each spacing by a random share of it in
	// [−Jitter/2, +Jitter/2): sends never line up on a fixed beat, yet a
	// backlog drains at the budget's own pace on average. A spacing is
	// lengthened when needed so that no minute holds more than PerMinute
	// sends. Zero means 0.25; negative none.
	Jitter float64
	// Clock; nil means RealClock.
	Clock Clock
	// Rand returns numbers in [0, 1) for the jitter; nil means math/rand.
	Rand func() float64
}

// SendBudget paces one account's sends: at most PerMinute a minute, spaced
// with jitter around 60/PerMinute seconds, at most InFlight at once.
// Every account has its own; a flood wait on a send pauses the sends to
// its chat in Session, not here.
type SendBudget struct {
	cfg      SendBudgetConfig
	interval time.Duration
	slots    chan struct{} // in-flight sends
	turn     chan struct{} // held from a send's turn until its request is made
	m        *SendBudgetMetrics

	// next is the earliest start of the next send: written while holding
	// turn, and under mu so that Room may read it at any time.
	mu   sync.Mutex
	next time.Time

	// recent are the start times of the last sends, a ring of at most
	// window entries, pos its oldest once full: a send starts no earlier
	// than window spacings after the send window sends before it, so no
	// window spacings (a minute, for budgets of up to maxWindow a minute)
	// hold more than window sends whatever the jitter. Only the holder of
	// turn touches them.
	recent []time.Time
	pos    int
	window int
}

// maxWindow bounds the send times a budget keeps.
const maxWindow = 64

// NewSendBudget returns an account's budget. m may be nil.
func NewSendBudget(cfg SendBudgetConfig, m *SendBudgetMetrics) *SendBudget {
	if cfg.PerMinute <= 0 {
		cfg.PerMinute = 20
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 3
	}
	switch {
	case cfg.Jitter == 0:
		cfg.Jitter = 0.25
	case cfg.Jitter < 0:
		cfg.Jitter = 0
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if m != nil {
		m.perSecond.WithLabelValues(cfg.Account).Set(cfg.PerMinute / 60)
		m.sends.WithLabelValues(cfg.Account)
		m.waited.WithLabelValues(cfg.Account)
		m.inFlight.WithLabelValues(cfg.Account)
	}
	window := min(max(int(cfg.PerMinute), 1), maxWindow)
	return &SendBudget{
		cfg: cfg, m: m,
		interval: time.Duration(float64(time.Minute) / cfg.PerMinute),
		slots:    make(chan struct{}, cfg.InFlight),
		turn:     make(chan struct{}, 1),
		recent:   make([]time.Time, 0, window),
		window:   window,
	}
}

// Config returns the budget's configuration with defaults filled in.
func (b *SendBudget) Config() SendBudgetConfig { return b.cfg }

// Acquire waits for an in-flight slot and then for the send's turn: the
// account's sends start one at a time, in the order they got their turns,
// each at least one spacing after the one before. The caller makes its
// sendMessage request, calls started (the next send may then start), waits
// for the outcome and calls done (which frees the slot; it calls started
// if the caller did not). Both are safe to call more than once.
func (b *SendBudget) Acquire(ctx context.Context) (started, done func(), err error) {
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	select {
	case b.turn <- struct{}{}:
	case <-ctx.Done():
		<-b.slots
		return nil, nil, ctx.Err()
	}
	now := b.cfg.Clock.Now()
	b.mu.Lock()
	at := b.next
	b.mu.Unlock()
	if at.Before(now) {
		at = now
	}
	if len(b.recent) == b.window {
		// The send window sends back started window spacings ago at the
		// earliest.
		if earliest := b.recent[b.pos].Add(time.Duration(b.window) * b.interval); at.Before(earliest) {
			at = earliest
		}
	}
	if !b.cfg.Clock.SleepUntil(ctx, at) {
		<-b.turn
		<-b.slots
		return nil, nil, ctx.Err()
	}
	b.setNext(at.Add(time.Duration(float64(b.interval) * (1 + b.cfg.Jitter*(b.cfg.Rand()-0.5)))))
	if b.m != nil {
		b.m.waited.WithLabelValues(b.cfg.Account).Add(at.Sub(now).Seconds())
		b.m.inFlight.WithLabelValues(b.cfg.Account).Inc()
	}
	var startOnce, doneOnce sync.Once
	started = func() {
		startOnce.Do(func() {
			if b.m != nil {
				b.m.sends.WithLabelValues(b.cfg.Account).Inc()
			}
			if len(b.recent) < b.window {
				b.recent = append(b.recent, at)
			} else {
				b.recent[b.pos] = at
				b.pos = (b.pos + 1) % b.window
			}
			<-b.turn
		})
	}
	done = func() {
		doneOnce.Do(func() {
			startOnce.Do(func() {
				// No send started: the turn goes back, unused, to the
				// next sender (nobody else has read next meanwhile).
				b.setNext(at)
				<-b.turn
			})
			if b.m != nil {
				b.m.inFlight.WithLabelValues(b.cfg.Account).Dec()
			}
			<-b.slots
		})
	}
	return started, done, nil
}

func (b *SendBudget) setNext(t time.Time) {
	b.mu.Lock()
	b.next = t
	b.mu.Unlock()
}

// Room reports when a send asking now could start, if no other send were
// waiting (now when the account may send at once), and how many sends are
// in flight. Choosing among accounts by the earliest start spreads sends
// over their budgets. (The start, not the wait: accounts paced on virtual
// clocks of their own compare where each stands in its own time.)
func (b *SendBudget) Room() (free time.Time, inFlight int) {
	b.mu.Lock()
	next := b.next
	b.mu.Unlock()
	if now := b.cfg.Clock.Now(); next.Before(now) {
		next = now
	}
	return next, len(b.slots)
}

// Interval is the spacing of the account's sends without jitter.
func (b *SendBudget) Interval() time.Duration { return b.interval }

// SendBudgetMetrics exports every account's send budget and its use.
type SendBudgetMetrics struct {
	perSecond *prometheus.GaugeVec
	sends     *prometheus.CounterVec
	waited    *prometheus.CounterVec
	inFlight  *prometheus.GaugeVec
}

// NewSendBudgetMetrics registers the send budget metrics on reg.
func NewSendBudgetMetrics(reg prometheus.Registerer) *SendBudgetMetrics {
	m := &SendBudgetMetrics{
		perSecond: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_send_budget_messages_per_second",
			Help: "The account's send budget (send_rate per minute / 60).",
		}, []string{"account"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stashd_send_budget_sends_total",
			Help: "Sends the account's budget let through; their rate over the budget is its use.",
		}, []string{"account"}),
		waited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stashd_send_budget_wait_seconds_total",
			Help: "Seconds sends waited for their turn in the account's budget.",
		}, []string{"account"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_sends_in_flight",
			Help: "Sends of the account between sendMessage and their outcome.",
		}, []string{"account"}),
	}
	reg.MustRegister(m.perSecond, m.sends, m.waited, m.inFlight)
	return m
}
