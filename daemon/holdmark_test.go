package daemon

import (
	"io"
	"log/slog"
	"testing"

	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// A delivery's lock round trip read that its destination waits for no
// reconciliation; then an identity check ran (another delivery's, after a
// failover, or the periodic one) and asked for one: a dump was restored.
// Hold does not trust the read from before the check. A read taken after
// the check is trusted, with no round trip more.
func TestHoldReadsAgainAfterACheckSinceTheLockRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openChecked(t)
	dest := tg.ChatID(-1009)
	d := &Daemon{store: st}
	w := quietWatch(d, dest)

	mark := d.checkMark()
	pending, err := st.ReconcilePending(ctx, dest) // the lock's round trip
	if err != nil || pending {
		t.Fatalf("before the restore the destination waits for a reconciliation: %v, %v", pending, err)
	}
	restoreInPlace(t, st)
	if err := w.checkIdentity(ctx); err != nil {
		t.Fatal(err)
	}
	if now, err := st.ReconcilePending(ctx, dest); err != nil || !now {
		t.Fatalf("the check asked for no reconciliation of the destination (%v, %v): the test proves nothing", now, err)
	}
	if held, err := w.Hold(ctx, dest, pending, mark); err != nil || !held {
		t.Errorf("Hold = %v, %v; want held: it trusted the lock's read from before the check that asked for the destination's reconciliation", held, err)
	}
	if held, err := w.Hold(ctx, dest, false, d.checkMark()); err != nil || held {
		t.Errorf("Hold with a read taken after the check = %v, %v; want it trusted", held, err)
	}
}

// openChecked opens a store on a fresh catalogue whose identity a check
// recorded.
func openChecked(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.CheckIdentity(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

// restoreInPlace makes st's catalogue what a dump restored in place
// leaves: tables with a new OID.
func restoreInPlace(t *testing.T, st *store.Store) {
	t.Helper()
	if _, err := st.Pool().Exec(t.Context(), `UPDATE database_identity SET catalogue_oid = catalogue_oid + 1`); err != nil {
		t.Fatal(err)
	}
}

// quietWatch is d's rewind watch over dests, its start-up check done,
// logging nowhere.
func quietWatch(d *Daemon, dests ...tg.ChatID) *rewindWatch {
	checked := make(chan struct{})
	close(checked)
	return &rewindWatch{d: d, dests: dests, log: slog.New(slog.NewTextHandler(io.Discard, nil)), checked: checked,
		unrecorded: map[tg.ChatID]bool{}}
}
