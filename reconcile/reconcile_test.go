package reconcile_test

import (
	"context"
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

// part is a package of one part posted in a reconcile world's source,
// with its delivery intent to the destination.
type part struct {
	pkg      store.Package
	d        store.Delivery
	uniqueID string
}

// newPart catalogues package i (a one-part zip posted in src) and writes
// its delivery intent to dest.
func newPart(t *testing.T, st *store.Store, w *tgsim.World, src, dest tg.ChatID, i int) part {
	t.Helper()
	ctx := t.Context()
	m := w.Post(src, 0, tgsim.Post{FileName: "s.zip", Data: []byte{'P', 'K', byte(i), byte(i >> 8)}})
	hash := make([]byte, 32)
	hash[0], hash[1], hash[2] = byte(i), byte(i>>8), 0xaa
	pkg := store.Package{ContentHash: hash, Name: "s.zip", Format: "zip", TotalSize: 4, PartCount: 1, Origin: m.Key()}
	id, _, err := st.CreatePackage(ctx, pkg, []store.Part{{Index: 0, FileName: "s.zip", Size: 4, SHA256: hash,
		UniqueID: m.Document.File.UniqueID, Source: m.Key()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pkg.ID = id
	d, _, err := st.EnsureIntent(ctx, id, dest, 0, "a")
	if err != nil {
		t.Fatal(err)
	}
	return part{pkg: pkg, d: d, uniqueID: m.Document.File.UniqueID}
}

// copyIn posts a copy of p in dest, as a send of its delivery leaves it.
func (p part) copyIn(w *tgsim.World, dest tg.ChatID) tg.Message {
	return w.Post(dest, 0, tgsim.Post{SameFileAs: p.uniqueID, Caption: ingest.Caption(p.pkg, 0, p.d.Token)})
}

// sent records p's delivery as sent with m.
func (p part) sent(t *testing.T, st *store.Store, m tg.Message) {
	t.Helper()
	if _, err := st.MarkSent(t.Context(), p.d, m.ID); err != nil {
		t.Fatal(err)
	}
}

// A rewind loses the notes that would have deleted second copies of
// delivered parts (a paused instance's late send, an old TDLib database's
// re-send): the reconciliation deletes them, keeping the copy the
// catalogue records, even one older than the run of known copies that
// would otherwise end the paging; a part whose record was lost keeps its
// oldest copy. The second copy of a part whose recorded copy is gone is
// its only copy, and stays.
func TestDestinationDeletesSecondCopies(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, src, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 6})
	w.SetDeleteRights("a", dest, true)

	far := newPart(t, st, w, src, dest, 0)
	farCopy := far.copyIn(w, dest)
	far.sent(t, st, farCopy)
	// 150 delivered parts: the newest page ends in a run of known copies.
	for i := range 150 {
		p := newPart(t, st, w, src, dest, 100+i)
		p.sent(t, st, p.copyIn(w, dest))
	}
	recorded, lost, gone := newPart(t, st, w, src, dest, 1), newPart(t, st, w, src, dest, 2), newPart(t, st, w, src, dest, 3)
	recordedCopy := recorded.copyIn(w, dest)
	recorded.sent(t, st, recordedCopy)
	lostOlder := lost.copyIn(w, dest)
	goneCopy := gone.copyIn(w, dest)
	gone.sent(t, st, goneCopy)
	recordedSecond, lostNewer, goneSecond, farSecond := recorded.copyIn(w, dest), lost.copyIn(w, dest), gone.copyIn(w, dest), far.copyIn(w, dest)
	// A reader's admin deleted the recorded copy of gone; the rewind lost
	// lost's delivery row.
	w.Delete(dest, goneCopy.ID)
	if _, err := st.Pool().Exec(ctx, `DELETE FROM deliveries WHERE package_id = $1`, lost.pkg.ID); err != nil {
		t.Fatal(err)
	}

	res := reconcileNow(t, st, c, dest, 10)
	if res.Seconds != 4 || res.Deleted != 3 || res.Pages != 2 {
		t.Fatalf("found %d second copies, deleted %d, read %d pages; want 4, 3 and 2", res.Seconds, res.Deleted, res.Pages)
	}
	have := map[tg.MessageID]bool{}
	for _, m := range w.Messages(dest) {
		have[m.ID] = true
	}
	for _, want := range []struct {
		what string
		m    tg.Message
		kept bool
	}{
		{"the recorded copy", recordedCopy, true}, {"its second copy", recordedSecond, false},
		{"the oldest copy of a part whose record was lost", lostOlder, true}, {"the newer one", lostNewer, false},
		{"the only copy left of a part whose recorded copy is gone", goneSecond, true},
		{"the recorded copy past the run of known copies", farCopy, true}, {"its second copy", farSecond, false},
	} {
		if have[want.m.ID] != want.kept {
			t.Errorf("%s (message %d): in the destination %v, want %v", want.what, want.m.ID.ServerID(), have[want.m.ID], want.kept)
		}
	}
	if d, ok, err := st.DeliveryByToken(ctx, recorded.d.Token, dest); err != nil || !ok || d.DestMessageID != recordedCopy.ID {
		t.Errorf("recorded delivery after the reconciliation: %+v, %v, %v; want its first copy", d, ok, err)
	}
	if got, ok, err := st.FoundCopy(ctx, lost.pkg.ID, 0, dest); err != nil || !ok || got != lostOlder.ID {
		t.Errorf("copy found of the lost delivery: %v, %v, %v; want %v", got, ok, err, lostOlder.ID)
	}
	if pending, err := st.ReconcilePending(ctx, dest); err != nil || pending {
		t.Errorf("destination still pending: %v, %v", pending, err)
	}
}

// Second copies the account may not delete (another sender's, without an
// administrator's right to delete them) are left, logged, and do not hold
// the destination's reconciliation.
func TestDestinationSecondCopiesNotDeletableDoNotHoldIt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, src, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 7})
	p := newPart(t, st, w, src, dest, 0)
	first := p.copyIn(w, dest)
	p.sent(t, st, first)
	p.copyIn(w, dest) // a second copy
	res := reconcileNow(t, st, c, dest, 0)
	if res.Seconds != 1 || res.Deleted != 0 {
		t.Fatalf("found %d second copies, deleted %d; want 1 and 0", res.Seconds, res.Deleted)
	}
	if got := len(w.Messages(dest)); got != 2 || w.Deleted(dest) != 0 {
		t.Errorf("destination holds %d messages, %d deleted; want both copies, none deleted", got, w.Deleted(dest))
	}
	if pending, err := st.ReconcilePending(ctx, dest); err != nil || pending {
		t.Errorf("destination still pending: %v, %v", pending, err)
	}
}

// reconcileNow asks for dest's reconciliation and runs it as account a,
// with knownRun (0: the default).
func reconcileNow(t *testing.T, st *store.Store, c *tgsim.Client, dest tg.ChatID, knownRun int) reconcile.Result {
	t.Helper()
	if err := st.RequestReconcile(t.Context(), []tg.ChatID{dest}, "test rewind"); err != nil {
		t.Fatal(err)
	}
	res, err := reconcile.Destination(t.Context(), reconcile.Config{Account: "a", KnownRun: knownRun}, st, c, dest)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// inDestination reports which of ms the destination still holds.
func inDestination(w *tgsim.World, dest tg.ChatID, ms ...tg.Message) []bool {
	have := map[tg.MessageID]bool{}
	for _, m := range w.Messages(dest) {
		have[m.ID] = true
	}
	out := make([]bool, len(ms))
	for i, m := range ms {
		out[i] = have[m.ID]
	}
	return out
}

// A part whose intent survived the rewind, and whose send landed twice:
// the oldest copy becomes its record, the newer is deleted.
func TestDestinationKeepsTheOldestCopyOfAnIntent(t *testing.T) {
	t.Parallel()
	st, w, src, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 8})
	w.SetDeleteRights("a", dest, true)
	p := newPart(t, st, w, src, dest, 0)
	older, newer := p.copyIn(w, dest), p.copyIn(w, dest)

	res := reconcileNow(t, st, c, dest, 0)
	if res.Seconds != 1 || res.Deleted != 1 || res.Recovered != 1 {
		t.Fatalf("found %d second copies, deleted %d, recovered %d; want 1, 1 and 1", res.Seconds, res.Deleted, res.Recovered)
	}
	if got := inDestination(w, dest, older, newer); !got[0] || got[1] {
		t.Errorf("older copy, newer copy in the destination: %v; want [true false]", got)
	}
	if d, ok, err := st.DeliveryByToken(t.Context(), p.d.Token, dest); err != nil || !ok || d.State != store.DeliverySent || d.DestMessageID != older.ID {
		t.Errorf("delivery after the reconciliation: %+v, %v, %v; want sent as the older copy", d, ok, err)
	}
}

// Two packages may share a file (a set posted again with one volume
// changed is a package of its own): with both delivery rows lost, each
// package's copy carries its own token, and neither is the other's second
// copy.
func TestDestinationKeepsEachPackagesCopyOfASharedFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, src, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 9})
	w.SetDeleteRights("a", dest, true)
	a := newPart(t, st, w, src, dest, 0)
	hash := make([]byte, 32)
	hash[0] = 0xbb
	b := part{pkg: store.Package{ContentHash: hash, Name: "s.zip", Format: "zip", TotalSize: 4, PartCount: 1, Origin: a.pkg.Origin},
		uniqueID: a.uniqueID}
	id, _, err := st.CreatePackage(ctx, b.pkg, []store.Part{{Index: 0, FileName: "s.zip", Size: 4, SHA256: hash,
		UniqueID: a.uniqueID, Source: a.pkg.Origin}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.pkg.ID = id
	if b.d, _, err = st.EnsureIntent(ctx, id, dest, 0, "a"); err != nil {
		t.Fatal(err)
	}
	aCopy, bCopy := a.copyIn(w, dest), b.copyIn(w, dest)
	if _, err := st.Pool().Exec(ctx, `DELETE FROM deliveries`); err != nil {
		t.Fatal(err)
	}

	res := reconcileNow(t, st, c, dest, 0)
	if res.Seconds != 0 || res.Deleted != 0 || w.Deleted(dest) != 0 {
		t.Fatalf("found %d second copies, deleted %d (%d in the world); want none", res.Seconds, res.Deleted, w.Deleted(dest))
	}
	if got := inDestination(w, dest, aCopy, bCopy); !got[0] || !got[1] {
		t.Errorf("each package's copy in the destination: %v; want both", got)
	}
}

// A second copy whose deletion fails for a reason that may pass (a 500,
// twice) is noted for the account to settle; the reconciliation finishes.
func TestDestinationNotesSecondCopiesItCouldNotDelete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, src, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 10})
	w.SetDeleteRights("a", dest, true)
	p := newPart(t, st, w, src, dest, 0)
	first := p.copyIn(w, dest)
	p.sent(t, st, first)
	second := p.copyIn(w, dest)
	w.InjectError("a", tg.MethodDeleteMessages, &tg.Error{Code: 500, Message: "INTERNAL"}, 2)

	res := reconcileNow(t, st, c, dest, 0)
	if res.Seconds != 1 || res.Deleted != 0 {
		t.Fatalf("found %d second copies, deleted %d; want 1 and 0", res.Seconds, res.Deleted)
	}
	strays, err := st.StraySends(ctx, "a")
	if err != nil || len(strays) != 1 || strays[0].Message != second.ID || strays[0].Token != p.d.Token {
		t.Fatalf("notes of account a: %+v, %v; want the second copy %v", strays, err, second.ID)
	}
	if pending, err := st.ReconcilePending(ctx, dest); err != nil || pending {
		t.Errorf("destination still pending: %v, %v", pending, err)
	}
}

// failingHistory fails the nth getChatHistory of its client with a 500.
type failingHistory struct {
	*tgsim.Client
	n, calls int
}

func (f *failingHistory) GetChatHistory(ctx context.Context, chat tg.ChatID, from tg.MessageID, limit int) ([]tg.Message, error) {
	f.calls++
	if f.calls == f.n {
		return nil, &tg.Error{Code: 500, Message: "INTERNAL"}
	}
	return f.Client.GetChatHistory(ctx, chat, from, limit)
}

// A reconciliation cut short after it rebuilt a part's record from its
// newer copy, and run again, still keeps the older copy: the record it
// rebuilt is not taken for one that survived the rewind. Both with the
// delivery's intent surviving and with its row lost.
func TestDestinationRunAgainKeepsTheOldestCopy(t *testing.T) {
	t.Parallel()
	for i, rowLost := range []bool{false, true} {
		st, w, src, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 11 + int64(i)})
		w.SetDeleteRights("a", dest, true)
		p := newPart(t, st, w, src, dest, 0)
		older := p.copyIn(w, dest)
		for range 150 {
			w.Post(dest, 0, tgsim.Post{Text: "a reader's comment"})
		}
		newer := p.copyIn(w, dest)
		if rowLost {
			if _, err := st.Pool().Exec(t.Context(), `DELETE FROM deliveries`); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.RequestReconcile(t.Context(), []tg.ChatID{dest}, "test rewind"); err != nil {
			t.Fatal(err)
		}
		cut := &failingHistory{Client: c, n: 2}
		if _, err := reconcile.Destination(t.Context(), reconcile.Config{Account: "a"}, st, cut, dest); err == nil {
			t.Fatal("the first run read its second page; want the failure")
		}
		// The first run rebuilt the record from the newer copy, and stopped.
		if got, want := recordedAs(t, st, dest, p, rowLost), newer.ID; got != want {
			t.Fatalf("row lost %v: after the run cut short the part is recorded as %v, want %v", rowLost, got, want)
		}
		if _, err := reconcile.Destination(t.Context(), reconcile.Config{Account: "a"}, st, cut, dest); err != nil {
			t.Fatal(err)
		}
		if got := inDestination(w, dest, older, newer); !got[0] || got[1] {
			t.Errorf("row lost %v: older copy, newer copy in the destination after a run again: %v; want [true false]", rowLost, got)
		}
	}
}

// A record that survived the rewind keeps its message: an older copy of
// its part is the second copy. An older message carrying the part's token
// with another file (its media replaced) neither takes a rebuilt record
// nor is deleted.
func TestDestinationSecondCopyByTokenNeedsTheFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, src, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 13})
	w.SetDeleteRights("a", dest, true)
	survived, rebuilt := newPart(t, st, w, src, dest, 0), newPart(t, st, w, src, dest, 1)
	olderOfSurvived := survived.copyIn(w, dest)
	survivedCopy := survived.copyIn(w, dest)
	survived.sent(t, st, survivedCopy)
	other := w.Post(src, 0, tgsim.Post{FileName: "x.zip", Data: []byte("another file")})
	otherFile := w.Post(dest, 0, tgsim.Post{SameFileAs: other.Document.File.UniqueID, Caption: ingest.Caption(rebuilt.pkg, 0, rebuilt.d.Token)})
	rebuiltCopy := rebuilt.copyIn(w, dest)

	res := reconcileNow(t, st, c, dest, 0)
	if res.Seconds != 2 || res.Deleted != 1 {
		t.Fatalf("found %d second copies, deleted %d; want 2 and 1", res.Seconds, res.Deleted)
	}
	if got := inDestination(w, dest, olderOfSurvived, survivedCopy, otherFile, rebuiltCopy); got[0] || !got[1] || !got[2] || !got[3] {
		t.Errorf("older copy, surviving record, other file, rebuilt record in the destination: %v; want [false true true true]", got)
	}
	for _, want := range []struct {
		p part
		m tg.Message
	}{{survived, survivedCopy}, {rebuilt, rebuiltCopy}} {
		if d, ok, err := st.DeliveryByToken(ctx, want.p.d.Token, dest); err != nil || !ok || d.DestMessageID != want.m.ID {
			t.Errorf("delivery of package %d: %+v, %v, %v; want recorded as %v", want.p.pkg.ID, d, ok, err, want.m.ID)
		}
	}
}

// A second copy of a part whose row was lost, noted when its deletion
// fails for a reason that may pass: the account's owner settles it by the
// kept copy.
func TestDestinationNotesSecondCopiesByFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, src, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 14})
	w.SetDeleteRights("a", dest, true)
	p := newPart(t, st, w, src, dest, 0)
	older, newer := p.copyIn(w, dest), p.copyIn(w, dest)
	if _, err := st.Pool().Exec(ctx, `DELETE FROM deliveries`); err != nil {
		t.Fatal(err)
	}
	w.InjectError("a", tg.MethodDeleteMessages, &tg.Error{Code: 420, Message: "FLOOD_WAIT_3"}, 2)

	res := reconcileNow(t, st, c, dest, 0)
	if res.Seconds != 1 || res.Deleted != 0 {
		t.Fatalf("found %d second copies, deleted %d; want 1 and 0", res.Seconds, res.Deleted)
	}
	strays, err := st.StraySends(ctx, "a")
	if err != nil || len(strays) != 1 || strays[0].Message != newer.ID {
		t.Fatalf("notes of account a: %+v, %v; want the newer copy %v", strays, err, newer.ID)
	}
	if kept, ok, err := st.KeptCopy(ctx, dest, p.uniqueID, p.d.Token); err != nil || !ok || kept != older.ID {
		t.Errorf("kept copy of the token: %v, %v, %v; want the older copy %v", kept, ok, err, older.ID)
	}
}

// recordedAs returns the message the catalogue records for p in dest: its
// delivery's, or the copy kept for its file when its row was lost.
func recordedAs(t *testing.T, st *store.Store, dest tg.ChatID, p part, rowLost bool) tg.MessageID {
	t.Helper()
	if rowLost {
		m, _, err := st.KeptCopy(t.Context(), dest, p.uniqueID, p.d.Token)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	d, _, err := st.DeliveryByToken(t.Context(), p.d.Token, dest)
	if err != nil {
		t.Fatal(err)
	}
	return d.DestMessageID
}

// A reconciliation that rebuilt a part's record from its newer copy and
// finished before it reached the older one (a run of known copies ended
// it): a later reconciliation that reaches the older copy moves the
// record to it and deletes the newer, as a rebuilt record is a guess; a
// record written after its send would keep its message.
func TestDestinationLaterReconciliationMovesARebuiltRecord(t *testing.T) {
	t.Parallel()
	for i, rowLost := range []bool{false, true} {
		st, w, src, dest, c := newReconcileWorld(t, tgsim.Config{Seed: 21 + int64(i)})
		w.SetDeleteRights("a", dest, true)
		p := newPart(t, st, w, src, dest, 0)
		older := p.copyIn(w, dest)
		for range 150 {
			w.Post(dest, 0, tgsim.Post{Text: "a reader's comment"})
		}
		for k := 1; k <= 3; k++ {
			known := newPart(t, st, w, src, dest, k)
			known.sent(t, st, known.copyIn(w, dest))
		}
		newer := p.copyIn(w, dest)
		if rowLost {
			if _, err := st.Pool().Exec(t.Context(), `DELETE FROM deliveries WHERE package_id = $1`, p.pkg.ID); err != nil {
				t.Fatal(err)
			}
		}
		reconcileNow(t, st, c, dest, 2)
		if got := inDestination(w, dest, older, newer); !got[0] || !got[1] || recordedAs(t, st, dest, p, rowLost) != newer.ID {
			t.Fatalf("row lost %v: after the first reconciliation %v, recorded as %v; want both copies, recorded as the newer %v",
				rowLost, got, recordedAs(t, st, dest, p, rowLost), newer.ID)
		}
		reconcileNow(t, st, c, dest, 0)
		if got := inDestination(w, dest, older, newer); !got[0] || got[1] {
			t.Errorf("row lost %v: older copy, newer copy after a later reconciliation: %v; want [true false]", rowLost, got)
		}
		if got := recordedAs(t, st, dest, p, rowLost); got != older.ID {
			t.Errorf("row lost %v: recorded as %v after the later reconciliation, want the older copy %v", rowLost, got, older.ID)
		}
	}
}
