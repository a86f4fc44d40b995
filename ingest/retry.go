package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/internal/service"
	"stashd/store"
	"stashd/tg"
)

// RetryStore is what the dead-letter retry loop reads and writes.
type RetryStore interface {
	DueDeadLetters(ctx context.Context, account string, now time.Time, limit int) ([]store.DeadLetter, error)
	ResolveDeadLetter(ctx context.Context, key tg.MessageKey) error
	ParkDeadLetter(ctx context.Context, key tg.MessageKey) error
	DeadLetterCounts(ctx context.Context) (map[store.DeadLetterState]int, error)
}

// RetryMetrics exports the dead-letter gauge.
type RetryMetrics struct {
	dead *prometheus.GaugeVec
}

// NewRetryMetrics registers stashd_dead_letters on reg.
func NewRetryMetrics(reg prometheus.Registerer) *RetryMetrics {
	m := &RetryMetrics{dead: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stashd_dead_letters",
		Help: "Dead letters by state (pending: will be retried; exhausted: needs an operator).",
	}, []string{"state"})}
	m.dead.WithLabelValues(string(store.DeadPending))
	m.dead.WithLabelValues(string(store.DeadExhausted))
	reg.MustRegister(m.dead)
	return m
}

// RetryConfig configures a Retrier.
type RetryConfig struct {
	// Interval between looks for due dead letters; zero means 30 s.
	Interval time.Duration
	// Batch is the most letters taken per look; zero means 100.
	Batch int
}

// Retrier is an account's dead-letter retry loop: due letters are fetched
// by id (getMessage) and run through the ingest path again.
type Retrier struct {
	cfg   RetryConfig
	p     *Pipeline
	store RetryStore
	m     *RetryMetrics
	run   service.Runner
}

// NewRetrier returns the retry loop of p's account. m may be nil.
func NewRetrier(cfg RetryConfig, p *Pipeline, st RetryStore, m *RetryMetrics) *Retrier {
	cfg.Interval = cmp.Or(cfg.Interval, 30*time.Second)
	cfg.Batch = cmp.Or(cfg.Batch, 100)
	return &Retrier{cfg: cfg, p: p, store: st, m: m}
}

// Start starts the loop.
func (r *Retrier) Start(ctx context.Context) error {
	return r.run.StartFunc(ctx, func(ctx context.Context) {
		service.Every(ctx, r.cfg.Interval, nil, func(ctx context.Context) {
			res, err := r.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				r.p.log.Warn("dead-letter retry", "err", err)
			}
			if res.Tried > 0 {
				r.p.log.Info("dead letters retried", "tried", res.Tried, "resolved", res.Resolved)
			}
		})
	})
}

// Stop stops the loop and waits for it.
func (r *Retrier) Stop() { r.run.Stop() }

// RetryResult counts what one look did.
type RetryResult struct {
	Tried, Resolved int
}

// RunOnce retries the due dead letters once.
func (r *Retrier) RunOnce(ctx context.Context) (RetryResult, error) {
	var res RetryResult
	due, err := r.store.DueDeadLetters(ctx, r.p.cfg.Account, r.p.cfg.Now(), r.cfg.Batch)
	if err != nil {
		return res, err
	}
	var errs []error
	for _, d := range due {
		res.Tried++
		ok, err := r.retry(ctx, d)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			errs = append(errs, err)
		}
		if ok {
			res.Resolved++
		}
	}
	if r.m != nil {
		if counts, err := r.store.DeadLetterCounts(ctx); err == nil {
			r.m.dead.WithLabelValues(string(store.DeadPending)).Set(float64(counts[store.DeadPending]))
			r.m.dead.WithLabelValues(string(store.DeadExhausted)).Set(float64(counts[store.DeadExhausted]))
		} else {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

func (r *Retrier) retry(ctx context.Context, d store.DeadLetter) (bool, error) {
	msg, err := r.p.readMessage(ctx, d.Key.Chat, d.Key.Message)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if tg.Classify(err) == tg.ClassIgnored {
			// TDLib asks for 406s to be dropped silently: the letter keeps
			// its reason and attempt count and is taken again next time.
			return false, nil
		}
		// The failure itself is the new attempt (a deleted message is
		// permanent and exhausts the letter).
		stub := tg.Message{ChatID: d.Key.Chat, ID: d.Key.Message}
		if dlErr := r.p.DeadLetter(ctx, stub, fmt.Errorf("fetch message: %w", err)); dlErr != nil {
			return false, dlErr
		}
		return false, nil
	}
	out, err := r.p.Process(ctx, msg)
	if err != nil {
		return false, err
	}
	switch out {
	case store.OutcomeDeadLetter:
		return false, nil
	case store.OutcomePartPending:
		// Back in its set; the sweeper settles it with the set. Off the
		// timer meanwhile, or every look would fetch it again.
		return false, r.store.ParkDeadLetter(ctx, d.Key)
	}
	return true, r.store.ResolveDeadLetter(ctx, d.Key)
}
