package reconcile_test

import (
	"errors"
	"os"
	"testing"

	"stashd/ingest"
	"stashd/internal/pgtest"
	"stashd/reconcile"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// newReconcileWorld opens a catalogue and a world with account "a", a
// source and a destination, and the account's client with its chats
// loaded (cfg tunes the world).
func newReconcileWorld(t *testing.T, cfg tgsim.Config) (st *store.Store, w *tgsim.World, src, dest tg.ChatID, c *tgsim.Client) {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	cfg.FilesDir = t.TempDir()
	w = tgsim.NewWorld(cfg)
	w.AddAccount("a", false)
	src = w.AddChat(tg.KindChannel, "source", "a")
	dest = w.AddChat(tg.KindChannel, "mirror", "a")
	c = w.Client("a")
	t.Cleanup(func() { c.Close() })
	if err := c.LoadChats(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st, w, src, dest, c
}

// After a rewind the catalogue has lost records of copies the destination
// holds: one package's delivery row whole, another's sent record. The
// reconciliation pages the destination (short pages included), rebuilds
// both and leaves the intact one alone, then lets sends resume.
func TestDestinationRebuildsLostRecords(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, src, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 3, ShortPageRate: 0.5})

	// Three packages delivered: each source file re-posted in the
	// destination with its delivery token, and recorded as sent.
	var pkgs []int64
	var sent []store.Delivery
	for i := range 3 {
		m := w.Post(src, 0, tgsim.Post{FileName: string(rune('a'+i)) + ".zip", Data: []byte{'P', 'K', byte(i)}})
		hash := make([]byte, 32)
		hash[0] = byte(i + 1)
		pkg := store.Package{ContentHash: hash, Name: "p.zip", Format: "zip", TotalSize: 3, PartCount: 1, Origin: m.Key()}
		id, _, err := st.CreatePackage(ctx, pkg, []store.Part{{Index: 0, FileName: "p.zip", Size: 3, SHA256: hash,
			UniqueID: m.Document.File.UniqueID, Source: m.Key()}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, _, err := st.EnsureIntent(ctx, id, dest, 0, "a")
		if err != nil {
			t.Fatal(err)
		}
		pkg.ID = id
		copyMsg := w.Post(dest, 0, tgsim.Post{SameFileAs: m.Document.File.UniqueID, Caption: ingest.Caption(pkg, 0, d.Token)})
		if _, err := st.MarkSent(ctx, d, copyMsg.ID); err != nil {
			t.Fatal(err)
		}
		w.Post(dest, 0, tgsim.Post{Text: "a reader's comment"})
		pkgs, sent = append(pkgs, id), append(sent, d)
	}
	// The rewind: package 0's delivery row is gone, package 1's copy is
	// an intent again.
	if _, err := st.Pool().Exec(ctx, `DELETE FROM deliveries WHERE package_id = $1`, pkgs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE deliveries SET state = 'intent', dest_message_id = NULL, sent_at = NULL
		WHERE package_id = $1`, pkgs[1]); err != nil {
		t.Fatal(err)
	}
	if err := st.RequestReconcile(ctx, []tg.ChatID{dest}, "test rewind"); err != nil {
		t.Fatal(err)
	}

	res, err := reconcile.Destination(ctx, reconcile.Config{}, st, c, dest)
	if err != nil {
		t.Fatal(err)
	}
	if res.Copies != 3 || res.Recovered != 2 {
		t.Fatalf("found %d copies, rebuilt %d records; want 3 and 2", res.Copies, res.Recovered)
	}
	if _, ok, err := st.FoundCopy(ctx, pkgs[0], 0, dest); err != nil || !ok {
		t.Errorf("package 0's copy not found by its file: %v, %v", ok, err)
	}
	if d, ok, err := st.DeliveryByToken(ctx, sent[1].Token, dest); err != nil || !ok || d.State != store.DeliverySent {
		t.Errorf("package 1's delivery after the reconciliation: %+v, %v, %v; want sent", d, ok, err)
	}
	if pending, err := st.ReconcilePending(ctx, dest); err != nil || pending {
		t.Errorf("destination still pending: %v, %v", pending, err)
	}
	if n, _ := st.RecoveredDeliveries(ctx); n != 2 {
		t.Errorf("recovered deliveries counted %d, want 2", n)
	}
}

// A long run of copies the catalogue knows ends the paging: the older
// history is known too, and is not read.
func TestDestinationStopsAtAKnownRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, src, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 4})
	for i := range 250 {
		m := w.Post(src, 0, tgsim.Post{FileName: "k.zip", Data: []byte{byte(i), byte(i >> 8)}})
		hash := make([]byte, 32)
		hash[0], hash[1] = byte(i), byte(i>>8)+1
		pkg := store.Package{ContentHash: hash, Name: "k.zip", Format: "zip", TotalSize: 2, PartCount: 1, Origin: m.Key()}
		id, _, err := st.CreatePackage(ctx, pkg, []store.Part{{Index: 0, FileName: "k.zip", Size: 2, SHA256: hash,
			UniqueID: m.Document.File.UniqueID, Source: m.Key()}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, _, err := st.EnsureIntent(ctx, id, dest, 0, "a")
		if err != nil {
			t.Fatal(err)
		}
		copyMsg := w.Post(dest, 0, tgsim.Post{SameFileAs: m.Document.File.UniqueID, Caption: "k.zip\n" + ingest.TokenPrefix + d.Token})
		if _, err := st.MarkSent(ctx, d, copyMsg.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RequestReconcile(ctx, []tg.ChatID{dest}, "test"); err != nil {
		t.Fatal(err)
	}
	res, err := reconcile.Destination(ctx, reconcile.Config{KnownRun: 100}, st, c, dest)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pages != 1 || res.Recovered != 0 {
		t.Fatalf("read %d pages, rebuilt %d; want 1 page, nothing rebuilt", res.Pages, res.Recovered)
	}
	if got := w.Calls("a")[tg.MethodGetChatHistory]; got != 1 {
		t.Errorf("getChatHistory called %d times, want 1", got)
	}
}

// A destination whose history cannot be read (the account lost access) is
// given up, not held for ever: the error says so, the row records why, and
// its sends are no longer held. A new request reads it again.
func TestDestinationUnreadableIsGivenUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, _, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 5})
	w.LoseAccess(dest, true)
	if err := st.RequestReconcile(ctx, []tg.ChatID{dest}, "test rewind"); err != nil {
		t.Fatal(err)
	}
	_, err := reconcile.Destination(ctx, reconcile.Config{}, st, c, dest)
	if !errors.Is(err, reconcile.ErrGaveUp) {
		t.Fatalf("reconciling an unreadable destination: %v, want it given up", err)
	}
	if pending, err := st.ReconcilePending(ctx, dest); err != nil || pending {
		t.Errorf("destination still held: %v, %v", pending, err)
	}
	rs, err := st.Reconciles(ctx)
	if err != nil || len(rs) != 1 || !rs[0].GaveUp || rs[0].LastError == "" || rs[0].FinishedAt.IsZero() {
		t.Fatalf("reconciliation rows %+v (%v): want one given up, with its reason", rs, err)
	}

	// Access back, asked again: read and finished.
	w.LoseAccess(dest, false)
	if err := st.RequestReconcile(ctx, []tg.ChatID{dest}, "again"); err != nil {
		t.Fatal(err)
	}
	if rs, _ := st.Reconciles(ctx); len(rs) != 1 || rs[0].GaveUp || rs[0].LastError != "" {
		t.Fatalf("re-requested reconciliation %+v: want a fresh row", rs)
	}
	if _, err := reconcile.Destination(ctx, reconcile.Config{}, st, c, dest); err != nil {
		t.Fatal(err)
	}
	if rs, _ := st.Reconciles(ctx); len(rs) != 1 || rs[0].GaveUp || rs[0].FinishedAt.IsZero() {
		t.Errorf("reconciliation after access came back: %+v, want finished", rs)
	}
}
