package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"stashd/internal/pgembed"
	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// The first identity check records the server; the same server again
// reports nothing; a recorded identity of another timeline or cluster (as
// a promoted standby or a restore leaves the row) is named as a rewind.
func TestCheckIdentity(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	if reason, err := st.CheckIdentity(ctx); err != nil || reason != "" {
		t.Fatalf("first check: %q, %v; want nothing", reason, err)
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason != "" {
		t.Fatalf("same server: %q, %v; want nothing", reason, err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE database_identity SET timeline = timeline - 1`); err != nil {
		t.Fatal(err)
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason == "" {
		t.Fatalf("older timeline recorded: %q, %v; want a rewind named", reason, err)
	}
	if reason, _ := st.CheckIdentity(ctx); reason != "" {
		t.Fatalf("the check records the current server, but the next one still says %q", reason)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE database_identity SET system_identifier = system_identifier + 1`); err != nil {
		t.Fatal(err)
	}
	if reason, _ := st.CheckIdentity(ctx); reason == "" {
		t.Fatal("another cluster's identity recorded: no rewind named")
	}
}

// A copy found in a destination rebuilds its lost record: a delivery row
// with its token is marked sent; without one the copy is kept and a later
// delivery of the same file there is found from it. A reconciliation
// holds sends to its destination until it finishes, and counts what it
// rebuilt.
func TestRecordCopies(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	const dest = tg.ChatID(-77)
	hash := make([]byte, 32)
	hash[0] = 9
	pkg := store.Package{ContentHash: hash, Name: "r.zip", Format: "zip", TotalSize: 2, PartCount: 2,
		Origin: tg.MessageKey{Chat: -1, Message: 1 << 20}}
	id, _, err := st.CreatePackage(ctx, pkg, []store.Part{
		{Index: 0, FileName: "r.zip.001", Size: 1, SHA256: hash, UniqueID: "u0", Source: pkg.Origin},
		{Index: 1, FileName: "r.zip.002", Size: 1, SHA256: hash, UniqueID: "u1", Source: tg.MessageKey{Chat: -1, Message: 2 << 20}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RequestReconcile(ctx, []tg.ChatID{dest}, "test"); err != nil {
		t.Fatal(err)
	}
	if pending, err := st.ReconcilePending(ctx, dest); err != nil || !pending {
		t.Fatalf("pending after the request: %v, %v", pending, err)
	}
	if err := st.StartReconcile(ctx, dest); err != nil {
		t.Fatal(err)
	}

	// Part 0's intent survived, its sent record did not.
	d, _, err := st.EnsureIntent(ctx, id, dest, 0, "a")
	if err != nil {
		t.Fatal(err)
	}
	m0, m1 := tg.MessageIDFromServer(10), tg.MessageIDFromServer(11)
	if out, err := st.RecordCopy(ctx, store.CopyFound{Destination: dest, Message: m0, Token: d.Token, UniqueID: "u0"}); err != nil || out.Outcome != store.CopyMarked {
		t.Fatalf("copy of an intent: %v, %v; want marked", out, err)
	}
	if out, err := st.RecordCopy(ctx, store.CopyFound{Destination: dest, Message: m0, Token: d.Token, UniqueID: "u0"}); err != nil || out.Outcome != store.CopyKnown {
		t.Fatalf("the same copy again: %v, %v; want known", out, err)
	}
	if out, err := st.RecordCopy(ctx, store.CopyFound{Destination: dest, Message: m0 + 1<<20, Token: d.Token, UniqueID: "u0"}); err != nil || out.Outcome != store.CopySecond {
		t.Fatalf("a second copy: %v, %v; want second", out, err)
	}
	// Part 1's row was lost whole: the copy is kept and found by file.
	if out, err := st.RecordCopy(ctx, store.CopyFound{Destination: dest, Message: m1, Token: "lost-token", UniqueID: "u1"}); err != nil || out.Outcome != store.CopyKept {
		t.Fatalf("copy without a row: %v, %v; want kept", out, err)
	}
	if out, err := st.RecordCopy(ctx, store.CopyFound{Destination: dest, Message: m1, Token: "lost-token", UniqueID: "u1"}); err != nil || out.Outcome != store.CopyKnown {
		t.Fatalf("a kept copy again: %v, %v; want known", out, err)
	}
	// Another copy of either part is a second copy, with the message
	// recorded for the part; another package's copy of the same file (its
	// own token) is not.
	if out, err := st.RecordCopy(ctx, store.CopyFound{Destination: dest, Message: m1 + 1<<20, Token: "lost-token", UniqueID: "u1"}); err != nil || out.Outcome != store.CopySecond || out.Recorded != m1 || !out.ByFile || !out.Rebuilt {
		t.Fatalf("a second copy of a kept file: %+v, %v; want second by file, recorded as %v", out, err, m1)
	}
	if out, err := st.RecordCopy(ctx, store.CopyFound{Destination: dest, Message: m0 + 2<<20, Token: d.Token, UniqueID: "u0"}); err != nil || out.Outcome != store.CopySecond || out.Recorded != m0 || out.ByFile || !out.Rebuilt {
		t.Fatalf("a second copy of a part recorded from a copy: %+v, %v; want second by token, recorded as %v, rebuilt", out, err, m0)
	}
	if out, err := st.RecordCopy(ctx, store.CopyFound{Destination: dest, Message: m1 + 3<<20, Token: "other-package", UniqueID: "u1"}); err != nil || out.Outcome != store.CopyKnown || out.Recorded != 0 {
		t.Fatalf("another package's copy of a kept file: %+v, %v; want known, no recorded message", out, err)
	}
	if got, ok, err := st.FoundCopy(ctx, id, 1, dest); err != nil || !ok || got != m1 {
		t.Fatalf("found copy of part 1: %v %v %v; want %v", got, ok, err, m1)
	}
	if _, ok, _ := st.FoundCopy(ctx, id, 1, dest-1); ok {
		t.Fatal("a copy found in another destination")
	}
	// The send path reads both in its one statement: part 0 is sent (its
	// copy marked it), part 1 gets a fresh intent and its found copy.
	ins, err := st.EnsureIntents(ctx, id, dest, []int{0, 1}, "a")
	if err != nil {
		t.Fatal(err)
	}
	if ins[0].PartIndex != 0 || ins[0].State != store.DeliverySent || ins[0].Fresh || ins[0].Token != d.Token {
		t.Errorf("intent of part 0 = %+v; want the existing row, sent", ins[0])
	}
	if ins[1].PartIndex != 1 || !ins[1].Fresh || ins[1].State != store.DeliveryIntent || ins[1].Copy != m1 {
		t.Errorf("intent of part 1 = %+v; want a fresh intent carrying the found copy %v", ins[1], m1)
	}
	again, err := st.EnsureIntents(ctx, id, dest, []int{1, 0}, "a")
	if err != nil || again[0].Fresh || again[0].Token != ins[1].Token || again[1].Token != d.Token {
		t.Errorf("intents again = %+v, %v; want the same rows, in the order asked, none fresh", again, err)
	}
	if other, err := st.EnsureIntents(ctx, id, dest-1, []int{1}, "a"); err != nil || other[0].Copy != 0 || !other[0].Fresh {
		t.Errorf("intent in another destination = %+v, %v; want fresh, no copy", other, err)
	}
	if err := st.ReconcileProgress(ctx, dest, 2, 2); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishReconcile(ctx, dest, nil); err != nil {
		t.Fatal(err)
	}
	if pending, _ := st.ReconcilePending(ctx, dest); pending {
		t.Fatal("still pending after it finished")
	}
	if n, err := st.RecoveredDeliveries(ctx); err != nil || n != 2 {
		t.Fatalf("recovered deliveries %d, %v; want 2", n, err)
	}
	rs, err := st.Reconciles(ctx)
	if err != nil || len(rs) != 1 || rs[0].Pages != 1 || rs[0].Copies != 2 || rs[0].FinishedAt.IsZero() {
		t.Fatalf("reconciles = %+v, %v", rs, err)
	}
	// A new request starts counting afresh but keeps the total.
	if err := st.RequestReconcile(ctx, []tg.ChatID{dest}, "again"); err != nil {
		t.Fatal(err)
	}
	rs, _ = st.Reconciles(ctx)
	if rs[0].Pages != 0 || rs[0].RecoveredTotal != 2 || !rs[0].FinishedAt.IsZero() || rs[0].Reason != "again" {
		t.Fatalf("after a new request: %+v", rs[0])
	}

	// An older copy of a part takes the record a newer one made, by the
	// delivery's token or by the file; only from the message it names.
	older0, older1 := m0-1<<20, m1-1<<20
	for _, c := range []struct {
		found  store.CopyFound
		byFile bool
		newer  tg.MessageID
		want   bool
	}{
		{store.CopyFound{Destination: dest, Message: older0, Token: d.Token, UniqueID: "u0"}, false, m0 + 5<<20, false},
		{store.CopyFound{Destination: dest, Message: older0, Token: d.Token, UniqueID: "u0"}, false, m0, true},
		{store.CopyFound{Destination: dest, Message: older1, Token: "other-package", UniqueID: "u1"}, true, m1, false},
		{store.CopyFound{Destination: dest, Message: older1, Token: "lost-token", UniqueID: "u1"}, true, m1, true},
	} {
		if ok, err := st.RecordOlderCopy(ctx, c.found, c.byFile, c.newer); err != nil || ok != c.want {
			t.Fatalf("record %+v in place of %v: %v, %v; want %v", c.found, c.newer, ok, err, c.want)
		}
	}
	if out, err := st.ClassifyCopy(ctx, store.CopyFound{Destination: dest, Message: m0, Token: d.Token, UniqueID: "u0"}); err != nil || out.Outcome != store.CopySecond || out.Recorded != older0 {
		t.Errorf("the newer copy of part 0 after the older took its record: %+v, %v; want second of %v", out, err, older0)
	}
	if got, ok, err := st.FoundCopy(ctx, id, 1, dest); err != nil || !ok || got != older1 {
		t.Errorf("found copy of part 1 after the older took its record: %v %v %v; want %v", got, ok, err, older1)
	}
	if kept, ok, err := st.KeptCopy(ctx, dest, "u1", "lost-token"); err != nil || !ok || kept != older1 {
		t.Errorf("kept copy of u1 with its token: %v %v %v; want %v", kept, ok, err, older1)
	}
	if _, ok, err := st.KeptCopy(ctx, dest, "u1", "other-token"); err != nil || ok {
		t.Errorf("kept copy of u1 with another token: %v, %v; want none", ok, err)
	}

	// A record written after its send is not rebuilt.
	sent, _, err := st.EnsureIntent(ctx, id, dest-2, 0, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkSent(ctx, sent, m0); err != nil {
		t.Fatal(err)
	}
	if out, err := st.ClassifyCopy(ctx, store.CopyFound{Destination: dest - 2, Message: m0 + 1<<20, Token: sent.Token, UniqueID: "u0"}); err != nil || out.Outcome != store.CopySecond || out.Rebuilt {
		t.Errorf("a second copy of a part recorded after its send: %+v, %v; want second, not rebuilt", out, err)
	}
}

// A reconciliation kept the newer copy of a part whose row was lost; a
// fresh intent then found it and recorded the delivery from it. A later
// reconciliation that moves the kept copy to an older one moves that
// delivery with it: its newer copy is about to be deleted.
func TestRecordOlderCopyMovesADeliveryRecordedFromTheKeptCopy(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	const dest = tg.ChatID(-78)
	id := onePartPackage(t, st, "pu", 7, 1<<20)
	older, newer := tg.MessageIDFromServer(10), tg.MessageIDFromServer(500)
	if rec, err := st.RecordCopy(ctx, store.CopyFound{Destination: dest, Message: newer, Token: "lost", UniqueID: "pu"}); err != nil || rec.Outcome != store.CopyKept {
		t.Fatalf("keep the newer copy: %+v, %v", rec, err)
	}
	ins, err := st.EnsureIntents(ctx, id, dest, []int{0}, "a")
	if err != nil || ins[0].Copy != newer {
		t.Fatalf("intents %+v, %v; want the kept copy found", ins, err)
	}
	if _, err := st.MarkSent(ctx, ins[0].Delivery, ins[0].Copy); err != nil {
		t.Fatal(err)
	}
	c := store.CopyFound{Destination: dest, Message: older, Token: "lost", UniqueID: "pu"}
	rec, err := st.ClassifyCopy(ctx, c)
	if err != nil || rec.Outcome != store.CopySecond || !rec.Rebuilt || rec.Recorded != newer {
		t.Fatalf("the older copy: %+v, %v; want a second copy of the kept, rebuilt", rec, err)
	}
	if ok, err := st.RecordOlderCopy(ctx, c, rec.ByFile, newer); err != nil || !ok {
		t.Fatalf("record the older copy: %v, %v", ok, err)
	}
	if d, _, err := st.DeliveryByToken(ctx, ins[0].Token, dest); err != nil || d.DestMessageID != older {
		t.Errorf("delivery recorded from the kept copy: %+v, %v; want moved to the older copy %v", d, err, older)
	}
}

// Two instances that reach a promoted server at once both move the package
// ids on: one after the other, so the later never sets the sequence back
// below ids the earlier gave out since.
func TestPackageIDMovesTakeTurns(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	other, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if _, err := other.Exec(ctx, `BEGIN; SELECT pg_advisory_xact_lock(hashtext('stashd: package ids move on'))`); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := st.Pool().Exec(wait, store.SkipIDsSQL, 1); err == nil {
		t.Fatal("the ids moved while another move was under way")
	}
	if _, err := other.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, store.SkipIDsSQL, 1); err != nil {
		t.Fatalf("move after the other's: %v", err)
	}
}

// A dump restored into the same database leaves the server's identity as
// it was, and the identity row restored with the dump names it: the check
// must still name the restore (the tables were created anew), once.
func TestCheckIdentityNamesADumpRestoredInPlace(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	st := openOn(t, url)
	ctx := t.Context()
	if reason, err := st.CheckIdentity(ctx); err != nil || reason != "" {
		t.Fatalf("first check: %q, %v; want nothing", reason, err)
	}
	backup := filepath.Join(t.TempDir(), "catalogue.dump")
	if err := pgembed.Dump(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason != "" {
		t.Fatalf("same catalogue: %q, %v; want nothing", reason, err)
	}
	if err := pgembed.Restore(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	st.ResetConnections()
	if reason, err := st.CheckIdentity(ctx); err != nil || reason == "" {
		t.Fatalf("after the dump was restored: %q, %v; want a rewind named", reason, err)
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason != "" {
		t.Fatalf("the check records the restored catalogue, but the next one still says %q (%v)", reason, err)
	}
	// A row an older stashd recorded, without the table's OID (a dump
	// taken before it was noted): nothing tells it from a restore.
	if _, err := st.Pool().Exec(ctx, `UPDATE database_identity SET catalogue_oid = NULL`); err != nil {
		t.Fatal(err)
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason == "" {
		t.Fatalf("a row without the table's OID: %q, %v; want a rewind named", reason, err)
	}
}

// The check that names a rewind also records the new server or tables, so
// the next check names nothing: the destinations must be held by then, in
// the same commit. A process that stopped (or failed to write) between the
// record and its request for reconciliations, or another instance whose
// check came just after the record, would otherwise send to a destination
// the rewound catalogue no longer knows it delivered to.
func TestCheckIdentityHoldsTheDestinationsOfTheRewindItNames(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	const dest = tg.ChatID(-78)
	id := onePartPackage(t, st, "h0", 11, 1<<20)
	if _, _, err := st.EnsureIntent(ctx, id, dest, 0, "a"); err != nil {
		t.Fatal(err)
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason != "" {
		t.Fatalf("first check: %q, %v; want nothing", reason, err)
	}
	// The catalogue's tables created anew, as a restored dump has them.
	if _, err := st.Pool().Exec(ctx, `UPDATE database_identity SET catalogue_oid = catalogue_oid + 1`); err != nil {
		t.Fatal(err)
	}
	// The destinations the caller names (here one named twice, and the
	// one delivered to) are held with those the catalogue records.
	const named = tg.ChatID(-81)
	if reason, err := st.CheckIdentity(ctx, named, dest, named); err != nil || reason == "" {
		t.Fatalf("after a restore: %q, %v; want a rewind named", reason, err)
	}
	for _, d := range []tg.ChatID{dest, named} {
		if pending, err := st.ReconcilePending(ctx, d); err != nil || !pending {
			t.Errorf("destination %d, once the check named the rewind: pending %v (%v), want held", d, pending, err)
		}
	}
}

// A destination named twice in a request is asked for once: ON CONFLICT
// DO UPDATE refuses to touch a row twice in one statement.
func TestReconcileRequestTakesADestinationNamedTwice(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	if err := st.RequestReconcile(ctx, []tg.ChatID{-80, -82, -80}, "twice"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []tg.ChatID{-80, -82} {
		if pending, err := st.ReconcilePending(ctx, d); err != nil || !pending {
			t.Errorf("destination %d: pending %v (%v), want held", d, pending, err)
		}
	}
}

// Two instances share a catalogue that a dump is restored over in place.
// The first to check records the restored tables; the second ran on the
// old ones too, and its listeners hold watermarks past what the catalogue
// forgot: its check must still name the restore (so that it reloads its
// sources), and until then its sources' state must not be written.
func TestEveryInstanceLearnsOfADumpRestoredInPlace(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	a, b := openOn(t, url), openOn(t, url)
	ctx := t.Context()
	chat := tg.ChatID(-100)
	if err := a.EnsureSource(ctx, store.Source{ChatID: chat, Account: "acc"}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*store.Store{a, b} {
		if reason, err := st.CheckIdentity(ctx); err != nil || reason != "" {
			t.Fatalf("first check: %q, %v; want nothing", reason, err)
		}
	}
	backup := filepath.Join(t.TempDir(), "catalogue.dump")
	if err := pgembed.Dump(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	if err := pgembed.Restore(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	a.ResetConnections()
	b.ResetConnections()
	if reason, err := a.CheckIdentity(ctx); err != nil || reason == "" {
		t.Fatalf("first instance: %q, %v; want the restore named", reason, err)
	}
	// A destination only the second instance sends to: the first's check
	// asked for no reconciliation of it, and the dump may still queue
	// deliveries to it that went since.
	const dest = tg.ChatID(-200)
	if pending, err := a.ReconcilePending(ctx, dest); err != nil || pending {
		t.Errorf("first instance, after its check: deliveries to %d held %v (%v); want them going", dest, pending, err)
	}
	if pending, err := b.ReconcilePending(ctx, dest); err != nil || !pending {
		t.Errorf("second instance, before its check: deliveries to %d held %v (%v); want them held", dest, pending, err)
	}
	if err := b.SaveSourceState(ctx, chat, false, "", 9, 9); err != nil {
		t.Fatal(err)
	}
	if src, err := b.GetSource(ctx, chat); err != nil || src.Watermark != 0 {
		t.Errorf("the second instance wrote its watermark %d (%v) before its check named the restore; want 0 as restored",
			src.Watermark, err)
	}
	if reason, err := b.CheckIdentity(ctx); err != nil || reason == "" {
		t.Errorf("second instance, after the first recorded the restored tables: %q, %v; want the restore named", reason, err)
	}
	if reason, err := b.CheckIdentity(ctx); err != nil || reason != "" {
		t.Errorf("second instance's next check: %q, %v; want nothing", reason, err)
	}
	if pending, err := b.ReconcilePending(ctx, dest); err != nil || pending {
		t.Errorf("second instance, after its check: deliveries to %d held %v (%v); want them going", dest, pending, err)
	}
}

// A dump restored in place keeps the server, so no new connection moves the
// package ids on as a failover's does: the check that names the restore
// does, so that no new package takes the id of one catalogued since the
// dump, which links and work in flight may still name.
func TestPackageIDsMoveOnAfterADumpRestoredInPlace(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	st := openOn(t, url)
	ctx := t.Context()
	if _, err := st.CheckIdentity(ctx); err != nil {
		t.Fatal(err)
	}
	onePartPackage(t, st, "kept", 1, 1)
	backup := filepath.Join(t.TempDir(), "catalogue.dump")
	if err := pgembed.Dump(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	lost := onePartPackage(t, st, "lost", 2, 2)
	if err := pgembed.Restore(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	st.ResetConnections()
	if reason, err := st.CheckIdentity(ctx); err != nil || reason == "" {
		t.Fatalf("check after the restore: %q, %v; want the restore named", reason, err)
	}
	if err := st.IDMoveFailure(); err != nil {
		t.Fatal(err)
	}
	if fresh := onePartPackage(t, st, "fresh", 3, 3); fresh <= lost {
		t.Errorf("a package catalogued after the restore took id %d; the catalogue gave out ids up to %d before it", fresh, lost)
	}
}
