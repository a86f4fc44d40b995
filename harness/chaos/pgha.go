package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"stashd/internal/pgembed"
	"stashd/internal/service"
)

// Standby modes (Options.PGStandby).
const (
	StandbySync  = "sync"
	StandbyAsync = "async"
)

// startPostgres starts the run's database: one cluster in dir/postgres,
// or with a standby a primary in dir/postgres-a and a standby copied from
// it in dir/postgres-b, and the daemons' connection string naming both,
// so that after a failover they find whichever accepts writes.
//
// PostgreSQL's durable defaults, as a deployment runs it: with
// synchronous_commit off, a server crash loses the last commits, a
// delivery intent among them, and its send would be made twice.
func (h *harness) startPostgres(ctx context.Context, dir string) error {
	if h.o.PGStandby == "" {
		h.pgCfg = pgembed.Config{Dir: filepath.Join(dir, "postgres"), Logger: h.log}
		pg, err := pgembed.Start(ctx, h.pgCfg)
		if err != nil {
			return err
		}
		h.pg, h.pgURL = pg, pg.URL("")
		return nil
	}
	sync := h.o.PGStandby == StandbySync
	h.pgCfg = pgembed.Config{Dir: filepath.Join(dir, "postgres-a"), Logger: h.log, Synchronous: sync}
	pg, err := pgembed.Start(ctx, h.pgCfg)
	if err != nil {
		return err
	}
	h.pg = pg
	h.standbyCfg = pgembed.Config{Dir: filepath.Join(dir, "postgres-b"), Logger: h.log, Synchronous: sync,
		StandbyOf: pg.URL("")}
	standby, err := pgembed.Start(ctx, h.standbyCfg)
	if err != nil {
		return err
	}
	h.standby = standby
	// The connection string must name the same socket directories after
	// every rebuild: each cluster's directory, never a temporary one.
	for _, c := range []*pgembed.Cluster{pg, standby} {
		if c.SocketDir() != c.Dir() {
			return fmt.Errorf("chaos: %s is too long a path for a postgres socket; use a shorter --dir", c.Dir())
		}
	}
	h.pgURL = pgembed.URLs("", pg, standby)
	if err := pg.WaitStreaming(ctx, time.Minute); err != nil {
		return err
	}
	h.log.Info("postgres standby streaming", "mode", h.o.PGStandby, "primary", pg.Dir(), "standby", standby.Dir())
	return nil
}

// stopPostgres stops every cluster of the run.
func (h *harness) stopPostgres() {
	h.mu.Lock()
	pg, standby := h.pg, h.standby
	h.mu.Unlock()
	if standby != nil {
		_ = standby.Stop()
	}
	_ = pg.Stop()
}

// failovers fails the database over o.PGFailovers times, spread over the
// publishing at seeded moments.
func (h *harness) failovers(ctx context.Context) error {
	for i := range h.o.PGFailovers {
		share := h.o.Duration / time.Duration(h.o.PGFailovers+1)
		wait := share/2 + time.Duration(h.rng.Int64N(int64(share)+1))
		if i == 0 {
			wait = share
		}
		if !service.Sleep(ctx, wait) {
			return ctx.Err()
		}
		if err := h.failover(ctx); err != nil {
			return err
		}
	}
	return nil
}

// failover SIGKILLs the primary (every process of it), promotes the standby (pg_ctl promote),
// and copies a new standby from the new primary into the dead primary's
// directory, as Patroni or an operator would. With an asynchronous
// standby the commits it had not received are lost: the catalogue
// rewinds.
func (h *harness) failover(ctx context.Context) error {
	h.pgOps.Lock()
	defer h.pgOps.Unlock()
	h.mu.Lock()
	old, standby, oldCfg := h.pg, h.standby, h.pgCfg
	h.mu.Unlock()
	if h.o.PGStandby == StandbyAsync {
		// An asynchronous standby lags its primary: its WAL senders stop
		// for a seeded 1 to 3 s, commits go on meanwhile, and the crash
		// below loses them (on loopback the lag is otherwise too short to
		// lose anything).
		senders, err := old.Walsenders(ctx)
		if err != nil {
			return fmt.Errorf("find the primary's WAL senders: %w", err)
		}
		for _, pid := range senders {
			_ = syscall.Kill(pid, syscall.SIGSTOP)
		}
		lag := time.Second + time.Duration(h.rng.Int64N(int64(2*time.Second)))
		h.log.Info("standby lagging", "for", lag.String())
		if !service.Sleep(ctx, lag) {
			return ctx.Err()
		}
	}
	if err := old.Crash(); err != nil {
		return fmt.Errorf("kill the primary: %w", err)
	}
	h.mu.Lock()
	h.pgKilled = append(h.pgKilled, time.Now())
	h.mu.Unlock()
	h.log.Info("primary killed; promoting the standby", "failover", h.rep.PGFailovers+1, "of", h.o.PGFailovers)
	if err := standby.Promote(ctx); err != nil {
		return err
	}
	_ = old.Stop() // its socket directory and files; the server is gone
	// The old primary's data is discarded: it may hold commits the new
	// primary never received, and a standby must be a copy of its primary.
	if err := os.RemoveAll(filepath.Join(oldCfg.Dir, "data")); err != nil {
		return fmt.Errorf("discard the old primary's data: %w", err)
	}
	newCfg := h.standbyCfg
	newCfg.StandbyOf = ""
	rebuilt := oldCfg
	rebuilt.StandbyOf = standby.URL("")
	fresh, err := pgembed.Start(ctx, rebuilt)
	if err != nil {
		return fmt.Errorf("copy a new standby: %w", err)
	}
	h.mu.Lock()
	h.pg, h.pgCfg, h.standby, h.standbyCfg = standby, newCfg, fresh, rebuilt
	h.rep.PGFailovers++
	h.mu.Unlock()
	if err := standby.WaitStreaming(ctx, time.Minute); err != nil {
		return err
	}
	h.log.Info("failed over", "primary", standby.Dir(), "standby", fresh.Dir())
	return nil
}
