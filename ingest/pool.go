package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"stashd/listener"
	"stashd/store"
	"stashd/tg"
)

// Queue is the listener side of the pool: where work comes from and where
// its completion is reported.
type Queue interface {
	Queue() <-chan listener.Item
	Done(item listener.Item)
	Release(item listener.Item)
	MarkDirty(chat tg.ChatID, reason string)
}

// Processor handles one message; Pipeline implements it.
type Processor interface {
	Process(ctx context.Context, msg tg.Message) (store.Outcome, error)
	DeadLetter(ctx context.Context, msg tg.Message, err error) error
	GetMessage(ctx context.Context, chat tg.ChatID, id tg.MessageID) (tg.Message, error)
}

// ErrAllWorkersDead is reported by Pool.Fatal when every worker of an
// account has crashed too often in a row to be restarted.
var ErrAllWorkersDead = errors.New("all ingest workers are dead")

// PoolConfig configures a Pool.
type PoolConfig struct {
	// Account labels metrics and logs.
	Account string
	// Workers is the number of workers; zero means 4.
	Workers int
	// MaxCrashes is how many consecutive crashes (without a handled item in
	// between) a worker survives; zero means 10. A worker past it stays dead.
	MaxCrashes int
	// RestartBackoff is the first restart delay (doubling, with jitter, up to
	// 30 s); zero means 100 ms.
	RestartBackoff time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

// Pool is an account's supervised ingest workers. A worker that panics is
// restarted with backoff; the item it held becomes a dead letter, so nothing
// is lost to a crash.
type Pool struct {
	cfg   PoolConfig
	queue Queue
	proc  Processor
	m     *Metrics
	log   *slog.Logger

	alive    atomic.Int32
	wg       sync.WaitGroup
	cancel   context.CancelFunc
	fatal    chan error
	fatalSet sync.Once
	started  atomic.Bool
}

// NewPool returns a pool over queue. m may be nil.
func NewPool(cfg PoolConfig, q Queue, proc Processor, m *Metrics) *Pool {
	cfg.Workers = cmp.Or(cfg.Workers, 4)
	cfg.MaxCrashes = cmp.Or(cfg.MaxCrashes, 10)
	cfg.RestartBackoff = cmp.Or(cfg.RestartBackoff, 100*time.Millisecond)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pool{cfg: cfg, queue: q, proc: proc, m: m, fatal: make(chan error, 1),
		log: log.With("component", "ingest", "account", cfg.Account)}
}

// Start launches the workers. ctx is the work context: cancelling it (or
// calling Stop) abandons items in flight. To drain instead, close the
// listener's queue and Wait.
func (p *Pool) Start(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("pool already started")
	}
	ctx, p.cancel = context.WithCancel(ctx)
	if p.m != nil {
		p.m.configured.WithLabelValues(p.cfg.Account).Set(float64(p.cfg.Workers))
		p.m.alive.WithLabelValues(p.cfg.Account).Set(0)
	}
	// The workers count as alive once Start returns, not once their
	// goroutines first run: a health check right after a start (systemd's
	// READY=1, then /readyz) must not find none.
	p.setAlive(int32(p.cfg.Workers))
	for i := range p.cfg.Workers {
		p.wg.Add(1)
		go p.supervise(ctx, i)
	}
	return nil
}

// Wait waits for the workers to exit (after the queue is closed) until ctx
// ends, then cancels work still in flight and waits for it to stop. It
// reports whether the drain finished in time.
func (p *Pool) Wait(ctx context.Context) bool {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		p.Stop()
		return true
	case <-ctx.Done():
		p.Stop()
		<-done
		return false
	}
}

// Stop cancels work in flight and waits for the workers. Idempotent.
func (p *Pool) Stop() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
}

// Alive returns the number of running workers.
func (p *Pool) Alive() int { return int(p.alive.Load()) }

// Fatal delivers ErrAllWorkersDead when no worker is left.
func (p *Pool) Fatal() <-chan error { return p.fatal }

func (p *Pool) setAlive(delta int32) {
	n := p.alive.Add(delta)
	if p.m != nil {
		p.m.alive.WithLabelValues(p.cfg.Account).Set(float64(n))
	}
}

func (p *Pool) supervise(ctx context.Context, id int) {
	defer p.wg.Done()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.cfg.RestartBackoff
	b.MaxInterval = 30 * time.Second
	b.MaxElapsedTime = 0
	crashes := 0
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			p.setAlive(1) // restarted; Start counted the first
		}
		handled, crashed := p.work(ctx)
		p.setAlive(-1)
		if !crashed {
			return // queue closed or work cancelled
		}
		if handled > 0 {
			crashes = 0
			b.Reset()
		}
		crashes++
		if crashes > p.cfg.MaxCrashes {
			p.log.Error("ingest worker crashed too often; it stays dead", "worker", id, "crashes", crashes)
			if p.alive.Load() == 0 {
				p.fatalSet.Do(func() { p.fatal <- fmt.Errorf("account %s: %w", p.cfg.Account, ErrAllWorkersDead) })
			}
			return
		}
		wait := b.NextBackOff()
		p.log.Warn("restarting ingest worker", "worker", id, "attempt", attempt, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// work runs one worker until the queue closes, ctx ends, or it panics.
func (p *Pool) work(ctx context.Context) (handled int, crashed bool) {
	var cur *listener.Item
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		crashed = true
		p.log.Error("ingest worker panicked", "panic", r, "stack", string(debug.Stack()))
		if cur != nil {
			p.abandonPanicked(ctx, *cur, r)
		}
	}()
	q := p.queue.Queue()
	for {
		select {
		case <-ctx.Done():
			return handled, false
		case item, ok := <-q:
			if !ok {
				return handled, false
			}
			cur = &item
			p.handle(ctx, item)
			cur = nil
			handled++
		}
	}
}

func (p *Pool) handle(ctx context.Context, item listener.Item) {
	msg := item.Message
	if item.Refetch {
		m, err := p.proc.GetMessage(ctx, msg.ChatID, msg.ID)
		if err != nil {
			p.refetchFailed(ctx, item, fmt.Errorf("fetch changed message: %w", err))
			return
		}
		msg = m
	}
	if _, err := p.proc.Process(ctx, msg); err != nil {
		if item.Refetch {
			p.refetchFailed(ctx, item, err)
			return
		}
		if ctx.Err() == nil {
			p.log.Error("message abandoned", "source", msg.ChatID, "message", msg.ID.ServerID(), "err", err)
			// Not handled and not lost: catch-up pages from the watermark
			// that this message now holds back.
			p.queue.MarkDirty(msg.ChatID, "abandoned")
		}
		p.queue.Release(item)
		return
	}
	p.queue.Done(item)
}

// refetchFailed keeps a changed message (an edit, which may have turned a
// text into a document) whose fetch or handling failed with err: nothing
// else would bring it back, since catch-up pages above the watermark
// only and the rescan walks a date window. It becomes a dead letter, which
// the retry loop fetches again by id and handles, unless the message is
// gone (deleted: nothing to mirror) or this account cannot read its chat
// any more (the source lost, which catch-up records). A stop records it
// too. Any of these settles the re-fetch (Done); one that could not be
// recorded is released, and the listener's note of the edit brings it
// back at the next start.
func (p *Pool) refetchFailed(ctx context.Context, item listener.Item, err error) {
	msg := item.Message
	switch {
	case errors.Is(err, tg.ErrMessageNotFound):
		p.queue.Done(item)
		return
	case cannotRead(err):
		p.log.Warn("changed message not fetched: the source cannot be read", "source", msg.ChatID, "message", msg.ID.ServerID(), "err", err)
		p.queue.Done(item)
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// Only the message's key: the retry loop fetches it whole.
	stub := tg.Message{ChatID: msg.ChatID, ID: msg.ID}
	if dlErr := p.proc.DeadLetter(wctx, stub, err); dlErr != nil {
		p.log.Error("changed message not fetched, and not recorded for a retry; fetched again at the next start", "source", msg.ChatID,
			"message", msg.ID.ServerID(), "err", err, "record_err", dlErr)
		p.queue.Release(item)
		return
	}
	p.queue.Done(item)
}

// abandonPanicked turns the item a crashed worker held into a dead letter,
// so it is retried later and does not hold back the watermark.
func (p *Pool) abandonPanicked(ctx context.Context, item listener.Item, r any) {
	err := fmt.Errorf("worker panic: %v", r)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if dlErr := p.proc.DeadLetter(wctx, item.Message, err); dlErr != nil {
		p.log.Error("record panicked message", "source", item.Message.ChatID, "err", dlErr)
		p.queue.MarkDirty(item.Message.ChatID, "abandoned")
		p.queue.Release(item)
		return
	}
	p.queue.Done(item)
}
