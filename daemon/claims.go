package daemon

import (
	"context"
)

// releaseDeadClaims releases the source claims of earlier stashd processes
// on this host that are gone (a daemon killed by SIGKILL, OOM or a power
// loss holds its claims until they expire, ten minutes by default, and its
// restart would wait that long to scan its own sources). A claim owner is
// "host:pid" (Config.Instance); an owner on another host, or a pid that is
// alive, is left alone: its claims expire as usual.
func (d *Daemon) releaseDeadClaims(ctx context.Context) error {
	owners, err := d.store.ClaimOwners(ctx)
	if err != nil {
		return err
	}
	for _, owner := range owners {
		if owner == d.cfg.Instance || !deadLocalOwner(owner) {
			continue
		}
		n, err := d.store.ReleaseClaims(ctx, owner)
		if err != nil {
			return err
		}
		d.log.Info("released the source claims of a process that is gone", "owner", owner, "sources", n)
	}
	return nil
}
