package demo

import (
	"context"
	"fmt"

	"stashd/daemon"
	"stashd/internal/service"
)

// restartLoop restarts until stop ends; each restart runs to completion
// under ctx, so the demo never ends between a stop and a start.
func (r *runner) restartLoop(stop, ctx context.Context) {
	rctx, cancel := context.WithCancel(stop)
	defer cancel()
	service.Ticks(rctx, r.o.RestartEvery, nil, func(context.Context) {
		if err := r.restart(ctx); err != nil {
			if ctx.Err() == nil {
				r.log.Error("demo restart", "err", err)
			}
			cancel()
		}
	})
}

// restart stops the daemon (every other time abruptly) and starts a new one
// against the same database and world.
func (r *runner) restart(ctx context.Context) error {
	r.mu.Lock()
	old := r.d
	r.d = nil
	r.restarts++
	abrupt := r.restarts%2 == 0
	r.mu.Unlock()
	if abrupt {
		old.Kill()
	} else {
		old.Shutdown(ctx)
	}
	d, err := r.start(ctx, nil)
	if err != nil {
		select {
		case r.fatal <- fmt.Errorf("restart: %w", err):
		default:
		}
		return err
	}
	r.mu.Lock()
	r.d = d
	r.mu.Unlock()
	return nil
}

// idleRestart restarts the settled pipeline with nothing new published and
// returns the calls made by the first full catch-up cycle.
func (r *runner) idleRestart(ctx context.Context) (map[string]int, error) {
	r.mu.Lock()
	old := r.d
	r.d = nil
	r.mu.Unlock()
	old.Shutdown(ctx)

	var cycles []<-chan struct{}
	var before map[string]int
	d, err := r.start(ctx, func(d *daemon.Daemon) {
		cycles = d.CatchupCycles()
		before = r.world.TotalCalls()
	})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.d = d
	r.mu.Unlock()
	for _, done := range cycles {
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	after := r.world.TotalCalls()
	out := map[string]int{}
	for m, n := range after {
		if diff := n - before[m]; diff > 0 {
			out[m] = diff
		}
	}
	return out, nil
}
