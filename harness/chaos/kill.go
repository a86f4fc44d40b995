package chaos

import (
	"context"
	"fmt"
	"stashd/internal/pgembed"
	"stashd/internal/service"
	"syscall"
	"time"
)

// restartDelay is how long the harness waits before restarting a daemon
// that died, as systemd's RestartSec.
const restartDelay = 200 * time.Millisecond

// kill SIGKILLs a daemon o.Kills times, and pauses an owner o.Pauses times
// and SIGKILLs the postmaster o.PGKills times, both spread over the daemon
// kills. Each daemon kill waits for every daemon to be up, then a random
// time around the publishing duration's share, chooses its target (see
// target), then waits for its moment (a download, a send or a transaction
// in flight) at most momentWait.
func (h *harness) kill(ctx context.Context) error {
	mean := h.o.Duration / time.Duration(max(h.o.Kills, 1))
	for i := range h.o.Kills {
		if h.rep.Pauses < h.o.Pauses && i >= (h.rep.Pauses+1)*h.o.Kills/(h.o.Pauses+1) {
			if err := h.pause(ctx); err != nil {
				return err
			}
		}
		if h.rep.PGKills < h.o.PGKills && i >= (h.rep.PGKills+1)*h.o.Kills/(h.o.PGKills+1) {
			// The database dies under a running daemon.
			if err := h.waitReady(ctx); err != nil {
				return err
			}
			if !service.Sleep(ctx, time.Duration(h.rng.Int64N(int64(2*mean)+1))) {
				return ctx.Err()
			}
			if err := h.killPostgres(ctx); err != nil {
				return err
			}
		}
		if err := h.waitUp(ctx); err != nil {
			return err
		}
		if !service.Sleep(ctx, time.Duration(h.rng.Int64N(int64(2*mean)+1))) {
			return ctx.Err()
		}
		in, owner := h.target(ctx, i)
		moment := i % moments
		caught := h.waitMoment(ctx, in, moment)
		h.mu.Lock()
		p := in.p
		if p == nil || exited(p) {
			h.mu.Unlock()
			continue // it died by itself meanwhile; the supervisor restarts it
		}
		h.killed[p] = true
		h.struck[p.pid()] = true
		h.obs.strike(p)
		p.signal(syscall.SIGKILL)
		h.rep.Kills++
		if owner {
			h.rep.KillsOfOwners++
		}
		if caught {
			switch moment {
			case momentDownload:
				h.rep.KillsMidDownload++
			case momentSend:
				h.rep.KillsMidSend++
			case momentTransaction:
				h.rep.KillsMidTransaction++
			}
		}
		h.mu.Unlock()
		h.log.Info("daemon killed", "instance", in.n, "kill", h.rep.Kills, "of", h.o.Kills,
			"moment", momentName(moment, caught), "owner", owner)
		<-p.exited
	}
	// Without daemon kills to spread them over, the pauses and postmaster
	// kills are spread over the publishing.
	gap := h.o.Duration / time.Duration(h.o.Pauses+h.o.PGKills+1)
	for h.rep.Pauses < h.o.Pauses {
		if h.o.Kills == 0 && !service.Sleep(ctx, gap) {
			return ctx.Err()
		}
		if err := h.pause(ctx); err != nil {
			return err
		}
	}
	for h.rep.PGKills < h.o.PGKills {
		if h.o.Kills == 0 && !service.Sleep(ctx, gap) {
			return ctx.Err()
		}
		if err := h.killPostgres(ctx); err != nil {
			return err
		}
	}
	return nil
}

func momentName(m int, caught bool) string {
	if !caught {
		return "random"
	}
	return [...]string{"random", "mid-download", "mid-send", "mid-transaction"}[m]
}

// waitMoment polls, for at most momentWait, until in is in the middle of
// what moment names (a send or a transaction: any daemon, as the database
// shows them); it reports whether it was.
func (h *harness) waitMoment(ctx context.Context, in *instance, moment int) bool {
	if moment == momentAny {
		return false
	}
	deadline := time.Now().Add(momentWait)
	for time.Now().Before(deadline) {
		if h.inMoment(ctx, in, moment) {
			return true
		}
		if !service.Sleep(ctx, 5*time.Millisecond) {
			return false
		}
	}
	return false
}

func (h *harness) inMoment(ctx context.Context, in *instance, moment int) bool {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var yes bool
	switch moment {
	case momentDownload:
		return downloading(qctx, in)
	case momentSend:
		_ = h.db.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM deliveries WHERE state = 'intent')`).Scan(&yes)
	case momentTransaction:
		// A daemon session inside a transaction that writes (an advisory
		// lock wait is a transaction too, but holds nothing yet).
		_ = h.db.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'
			AND xact_start IS NOT NULL AND backend_xid IS NOT NULL)`).Scan(&yes)
	}
	return yes
}

// downloading reports whether in's metrics show downloaded bytes held (a
// download in flight or a package being hashed and listed).
func downloading(ctx context.Context, in *instance) bool {
	for _, v := range samples(ctx, in.metrics, "stashd_download_bytes_in_flight") {
		if v > 0 {
			return true
		}
	}
	return false
}

// killPostgres SIGKILLs the postmaster, leaves the database down a moment
// and starts it again on the same directory: PostgreSQL recovers from its
// write-ahead log.
func (h *harness) killPostgres(ctx context.Context) error {
	h.pgOps.Lock()
	defer h.pgOps.Unlock()
	h.mu.Lock()
	pg, cfg := h.pg, h.pgCfg
	h.mu.Unlock()
	if err := syscall.Kill(pg.PID(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill the postmaster: %w", err)
	}
	<-pg.Done()
	h.rep.PGKills++
	h.mu.Lock()
	h.pgKilled = append(h.pgKilled, time.Now())
	h.mu.Unlock()
	h.log.Info("postmaster killed", "kill", h.rep.PGKills, "of", h.o.PGKills)
	if !service.Sleep(ctx, 200*time.Millisecond+time.Duration(h.rng.Int64N(int64(time.Second)))) {
		return ctx.Err()
	}
	sock := pg.SocketDir()
	pg, err := pgembed.Start(ctx, cfg)
	if err != nil {
		return fmt.Errorf("restart postgres after a kill: %w", err)
	}
	h.mu.Lock()
	h.pg = pg
	h.mu.Unlock()
	if pg.SocketDir() != sock {
		return fmt.Errorf("chaos: postgres came back at %s, not %s", pg.SocketDir(), sock)
	}
	return nil
}
