package service

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrStarted is returned by Start on a service that is already running.
var ErrStarted = errors.New("service already started")

// Runner runs one goroutine between Start and Stop. Embed it and call
// StartFunc from the service's Start.
type Runner struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// StartFunc runs fn in a goroutine with a context that Stop cancels. ctx's
// values and cancellation are inherited.
func (r *Runner) StartFunc(ctx context.Context, fn func(ctx context.Context)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return ErrStarted
	}
	ctx, cancel := context.WithCancel(ctx)
	r.cancel, r.done = cancel, make(chan struct{})
	done := r.done
	go func() {
		defer close(done)
		fn(ctx)
	}()
	return nil
}

// Stop cancels the goroutine and waits for it to return. Stopping a service
// that never started, or stopping twice, does nothing.
func (r *Runner) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Done returns a channel closed when the goroutine has returned (nil before
// Start).
func (r *Runner) Done() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// Every calls fn once at once and then every interval until ctx ends. A
// wake channel (may be nil) triggers an extra run.
func Every(ctx context.Context, interval time.Duration, wake <-chan struct{}, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

// Sleep waits for d or until ctx ends, reporting whether the full wait
// happened.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Ticks calls fn every interval, and whenever wake (may be nil) fires,
// until ctx ends; unlike Every, not at once.
func Ticks(ctx context.Context, interval time.Duration, wake <-chan struct{}, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		fn(ctx)
	}
}
