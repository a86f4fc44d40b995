package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"stashd/store"
	"stashd/tg"
)

// blockedOrDone waits until a backend running a statement that contains
// sql waits for a row lock, or done is closed, for up to 10 s; it reports
// whether the statement was seen waiting.
func blockedOrDone(t *testing.T, pool *pgxpool.Pool, sql string, done <-chan struct{}) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return false
		default:
		}
		var n int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no statement %q waits for a lock, and none ended", sql)
	return false
}

// newIntent catalogues a one-part package and writes the intent of its
// delivery to -9.
func newIntent(t *testing.T, st *store.Store, seed byte) store.Delivery {
	t.Helper()
	ctx := t.Context()
	hash := make([]byte, 32)
	hash[0], hash[1] = 0x5a, seed
	pkg := store.Package{ContentHash: hash, Name: "r.zip", Format: "zip", TotalSize: 1, PartCount: 1,
		Origin: tg.MessageKey{Chat: -1, Message: tg.MessageID(int64(seed) << 20)}}
	id, _, err := st.CreatePackage(ctx, pkg, []store.Part{{Index: 0, FileName: "r.zip", Size: 1, SHA256: hash,
		UniqueID: "r" + string(rune('a'+seed)), Source: pkg.Origin}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := st.EnsureIntent(ctx, id, -9, 0, "a")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The record of a send that finds the part recorded by another session's
// commit, made after the record's statement began (the session's report
// of a second copy of the part), returns the message recorded, not its
// own: the caller deletes its own as the second copy. Read as the
// statement's snapshot had the row (an intent), it took its own message
// for the record, and both copies stayed.
func TestSendRecordReadsTheRecordCommittedMeanwhile(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	d := newIntent(t, st, 1)
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `UPDATE deliveries SET state = 'sent', dest_message_id = $2 WHERE token = $1`,
		d.Token, int64(tg.MessageIDFromServer(5))); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var rec tg.MessageID
	go func() {
		defer close(done)
		rec, err = st.MarkSent(ctx, d, tg.MessageIDFromServer(6))
	}()
	if !blockedOrDone(t, st.Pool(), "UPDATE deliveries SET state = 'sent'", done) {
		t.Fatal("the send's record did not wait for the other session's")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if err != nil || rec != tg.MessageIDFromServer(5) {
		t.Fatalf("record of the second copy = %v, %v; want the message the other session recorded (5)", rec, err)
	}
}

// underTakeover takes the lock name, then runs write (a guarded statement
// of that lock's holder) while another session's takeover of the lock is
// in flight, and commits the takeover once write waits for it (or ended
// without waiting, as a guard that reads its snapshot does). It returns
// write's error.
func underTakeover(t *testing.T, st *store.Store, name, sql string, write func(*store.Lock) error) error {
	t.Helper()
	ctx := t.Context()
	l, err := st.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `UPDATE package_locks SET owner = 'the taker' WHERE name = $1`, name); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err = write(l)
	}()
	blockedOrDone(t, st.Pool(), sql, done)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	return err
}

// An intent dropped under a lock whose takeover commits while the drop's
// statement runs stays: the new holder may be sending it. The drop's
// check of the lock waits for the takeover and reads it as committed, not
// as the statement's snapshot had the row (still this holder's).
func TestIntentDropSeesATakeoverCommittedMeanwhile(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	d := newIntent(t, st, 2)
	if err := underTakeover(t, st, "d:race", "DELETE FROM deliveries WHERE token", func(l *store.Lock) error {
		return l.DropUnsent(ctx, d.Token)
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.DeliveryByToken(ctx, d.Token, -9); err != nil || !ok {
		t.Fatalf("intent after a drop under a lock taken over meanwhile: found %v, %v; want it kept", ok, err)
	}
}

// A delivery given up under a lock whose takeover commits while the
// statement that clears its queue row runs stays queued: the new holder
// may have sent part of it. The clear's check of the lock waits for the
// takeover and reads it as committed.
func TestGiveUpSeesATakeoverCommittedMeanwhile(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	d := newIntent(t, st, 3)
	if err := st.WaitDelivery(ctx, store.Waiting{PackageID: d.PackageID, Destination: d.Destination, Account: "a",
		Parts: []tg.MessageKey{{Chat: -1, Message: 3 << 20}}, PartCount: 1}); err != nil {
		t.Fatal(err)
	}
	cleared := true
	if err := underTakeover(t, st, "d:give-up", "DELETE FROM waiting_deliveries", func(l *store.Lock) error {
		return st.Commit(ctx, store.ClearWaitingUnder(l, d.PackageID, d.Destination, &cleared))
	}); err != nil {
		t.Fatal(err)
	}
	if cleared {
		t.Error("the give-up reports its row cleared under a lock taken over")
	}
	if n, err := st.QueuedDeliveries(ctx, ""); err != nil || n != 1 {
		t.Fatalf("%d deliveries queued (%v) after a give-up under a lock taken over meanwhile, want it kept", n, err)
	}
}
