package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"stashd/internal/pgembed"
	"stashd/internal/service"
)

// backup takes a pg_dump of the catalogue halfway through publishing
// (Options.RestoreBackup) and returns a channel that yields the dump's
// path, or an error, once.
func (r *runner) backup(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() {
		if !service.Sleep(ctx, r.o.Duration/2) {
			done <- ctx.Err()
			return
		}
		start := time.Now()
		err := pgembed.Dump(ctx, "", r.o.DatabaseURL, r.dumpPath())
		if err == nil {
			r.log.Info("catalogue backed up halfway through publishing", "file", r.dumpPath(), "took", time.Since(start).Round(time.Millisecond).String())
		}
		done <- err
	}()
	return done
}

func (r *runner) dumpPath() string {
	return filepath.Join(filepath.Dir(r.o.FilesDir), "catalogue.dump")
}

// restoreBackup stops the daemon, restores the halfway backup over the
// catalogue (forgetting everything catalogued and delivered since), starts
// a new daemon, lets it settle and audits again: the daemon must notice the
// rewind and rebuild the lost delivery records from the destinations
// rather than send anything twice.
func (r *runner) restoreBackup(ctx context.Context, dumped <-chan error) (Report, error) {
	if err := <-dumped; err != nil {
		return Report{}, fmt.Errorf("back the catalogue up: %w", err)
	}
	r.mu.Lock()
	old := r.d
	r.d = nil
	r.mu.Unlock()
	old.Shutdown(ctx)
	if err := pgembed.Restore(ctx, "", r.o.DatabaseURL, r.dumpPath()); err != nil {
		return Report{}, fmt.Errorf("restore the catalogue: %w", err)
	}
	r.st.ResetConnections()
	r.log.Info("catalogue restored from the halfway backup; restarting the daemon")
	d, err := r.start(ctx, nil)
	if err != nil {
		return Report{}, err
	}
	r.mu.Lock()
	r.d = d
	r.restarts++
	r.mu.Unlock()
	settled, unsettled := r.settle(ctx)
	rep, err := r.audit(ctx)
	if err != nil {
		return rep, err
	}
	rep.Settled, rep.Unsettled = settled, unsettled
	recovered, err := r.st.RecoveredDeliveries(ctx)
	if err != nil {
		return rep, err
	}
	rep.DeliveriesRecovered = recovered
	rep.RestoredBackup = true
	return rep, nil
}
