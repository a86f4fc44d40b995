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
	st, err := store.Open(ctx, store.Config{URL: pgtest.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dest := tg.ChatID(-1009)
	if _, err := st.CheckIdentity(ctx, dest); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{store: st}
	checked := make(chan struct{})
	close(checked)
	w := &rewindWatch{d: d, dests: []tg.ChatID{dest}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), checked: checked,
		unrecorded: map[tg.ChatID]bool{}}

	mark := d.checkMark()
	pending, err := st.ReconcilePending(ctx, dest) // the lock's round trip
	if err != nil || pending {
		t.Fatalf("before the restore the destination waits for a reconciliation: %v, %v", pending, err)
	}
	// A dump restored in place: its tables have a new OID.
	if _, err := st.Pool().Exec(ctx, `UPDATE database_identity SET catalogue_oid = catalogue_oid + 1`); err != nil {
		t.Fatal(err)
	}
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
