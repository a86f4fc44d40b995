package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"stashd/store"
	"stashd/tg"
)

// A lease is taken once at a time: the same owner takes it back at once
// (a restart), another owner waits until it lapses or is released, a dead
// owner named by the caller loses it at once; every acquisition increments
// the epoch.
func TestLeaseAcquireRenewRelease(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	a, ok, err := st.AcquireLease(ctx, "acc", "a", time.Minute, "")
	if err != nil || !ok || a.Epoch != 1 || a.PrevOwner != "" {
		t.Fatalf("first acquisition = %+v, %v, %v; want epoch 1, no previous owner", a, ok, err)
	}
	if b, ok, err := st.AcquireLease(ctx, "acc", "b", time.Minute, ""); err != nil || ok || b.Owner != "a" {
		t.Fatalf("b took a's live lease: %+v, %v, %v", b, ok, err)
	}
	again, ok, err := st.AcquireLease(ctx, "acc", "a", time.Minute, "")
	if err != nil || !ok || again.Epoch != 2 || again.PrevOwner != "a" {
		t.Fatalf("a taking its own lease back = %+v, %v, %v; want epoch 2", again, ok, err)
	}
	if _, err := st.RenewLease(ctx, "acc", "a", 1, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renewal at the old epoch: %v, want ErrLeaseLost", err)
	}
	if until, err := st.RenewLease(ctx, "acc", "a", 2, time.Minute); err != nil || time.Until(until) < 50*time.Second {
		t.Fatalf("renewal = %v, %v; want about a minute from now", until, err)
	}
	dead, ok, err := st.AcquireLease(ctx, "acc", "b", time.Minute, "a")
	if err != nil || !ok || dead.Epoch != 3 || dead.PrevOwner != "a" {
		t.Fatalf("b taking a dead owner's lease = %+v, %v, %v; want epoch 3 from a", dead, ok, err)
	}
	if err := st.ReleaseLease(ctx, "acc", "b", 3); err != nil {
		t.Fatal(err)
	}
	l, err := st.Lease(ctx, "acc")
	if err != nil || l.Owner != "" || l.Epoch != 3 || l.Held() {
		t.Fatalf("released lease = %+v, %v; want no owner, epoch kept", l, err)
	}
	c, ok, err := st.AcquireLease(ctx, "acc", "c", time.Minute, "")
	if err != nil || !ok || c.Epoch != 4 || c.PrevOwner != "" {
		t.Fatalf("acquisition after a clean release = %+v, %v, %v; want epoch 4, no previous owner", c, ok, err)
	}
	// An expired lease is free.
	if _, err := st.Pool().Exec(ctx, `UPDATE accounts SET lease_until = now() - interval '1 second' WHERE name = 'acc'`); err != nil {
		t.Fatal(err)
	}
	if l, _ := st.Lease(ctx, "acc"); l.Held() || l.Ownerless() <= 0 {
		t.Fatalf("expired lease %+v: held or not ownerless", l)
	}
	d, ok, err := st.AcquireLease(ctx, "acc", "d", time.Minute, "")
	if err != nil || !ok || d.Epoch != 5 || d.PrevOwner != "c" {
		t.Fatalf("acquisition of an expired lease = %+v, %v, %v; want epoch 5 from c", d, ok, err)
	}
}

// takeTwice takes account's lease as "old" and then as "new" (a takeover)
// and returns a context fenced with the old epoch, and one with the new.
func takeTwice(t *testing.T, st *store.Store, account string) (stale, current *fenceCtx) {
	t.Helper()
	ctx := t.Context()
	old, ok, err := st.AcquireLease(ctx, account, "old", time.Minute, "")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE accounts SET lease_until = now() - interval '1 second' WHERE name = $1`, account); err != nil {
		t.Fatal(err)
	}
	cur, ok, err := st.AcquireLease(ctx, account, "new", time.Minute, "")
	if err != nil || !ok || cur.Epoch != old.Epoch+1 {
		t.Fatal(cur, ok, err)
	}
	stale = &fenceCtx{}
	stale.ctx = store.WithFence(ctx, account, old.Epoch, func() { stale.refused++ })
	current = &fenceCtx{}
	current.ctx = store.WithFence(ctx, account, cur.Epoch, func() { current.refused++ })
	return stale, current
}

type fenceCtx struct {
	ctx     context.Context
	refused int
}

// Every fenced write is refused by the database when it carries a stale
// epoch (the account was taken over), and changes nothing; the same write
// with the current epoch, or unfenced, goes through.
func TestFencedWritesRefuseAStaleEpoch(t *testing.T) {
	t.Parallel()
	st, chat := openWithSource(t)
	ctx := t.Context()
	sum := sha256.Sum256([]byte("p"))
	pkg, _, err := st.CreatePackage(ctx, store.Package{ContentHash: sum[:], Name: "p.zip", Format: "zip", TotalSize: 1, PartCount: 2,
		Origin: tg.MessageKey{Chat: chat, Message: 1 << 20}}, []store.Part{
		{Index: 0, FileName: "p.zip", Size: 1, SHA256: sum[:], Source: tg.MessageKey{Chat: chat, Message: 1 << 20}},
		{Index: 1, FileName: "p.z01", Size: 1, SHA256: sum[:], Source: tg.MessageKey{Chat: chat, Message: 2 << 20}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dest := tg.ChatID(-200)
	// Part 0's intent exists before the takeover; part 1's does not.
	part0, _, err := st.EnsureIntent(ctx, pkg, dest, 0, "acc")
	if err != nil {
		t.Fatal(err)
	}
	staleF, currentF := takeTwice(t, st, "acc")
	stale := staleF.ctx

	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrStaleEpoch) {
			t.Errorf("%s with a stale epoch: %v, want ErrStaleEpoch", name, err)
		}
	}
	check("AdvanceWatermark", st.AdvanceWatermark(stale, chat, 50))
	check("SaveSourceState", st.SaveSourceState(stale, chat, false, "", 60, 70))
	_, _, err = st.EnsureIntent(stale, pkg, dest, 1, "acc")
	check("EnsureIntent", err)
	_, err = st.MarkSent(stale, part0, tg.MessageIDFromServer(7))
	check("MarkSent", err)
	_, err = st.MarkSentByToken(stale, part0.Token, dest, tg.MessageIDFromServer(7), "")
	check("MarkSentByToken", err)
	if staleF.refused != 5 {
		t.Errorf("the fence's owner was told of %d refusals, want 5", staleF.refused)
	}

	src, err := st.GetSource(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	if src.Watermark != 0 || src.LastSeen != 0 {
		t.Errorf("stale writes moved the source: watermark %d, last seen %d", src.Watermark, src.LastSeen)
	}
	var intents, sent int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'sent') FROM deliveries`).Scan(&intents, &sent); err != nil {
		t.Fatal(err)
	}
	if intents != 1 || sent != 0 {
		t.Errorf("after stale writes: %d delivery rows, %d sent; want 1 intent, 0 sent", intents, sent)
	}

	// The current epoch writes, and so does an unfenced writer after it
	// (the epoch is not left behind on the row).
	cur := currentF.ctx
	if err := st.AdvanceWatermark(cur, chat, 50); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveSourceState(cur, chat, false, "", 60, 70); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.EnsureIntent(cur, pkg, dest, 1, "acc"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkSent(cur, part0, tg.MessageIDFromServer(7)); err != nil {
		t.Fatal(err)
	}
	if err := st.AdvanceWatermark(ctx, chat, 80); err != nil {
		t.Fatalf("unfenced write after fenced ones: %v", err)
	}
	if src, _ := st.GetSource(ctx, chat); src.Watermark != 80 {
		t.Errorf("watermark %d, want 80", src.Watermark)
	}
	if currentF.refused != 0 {
		t.Errorf("current epoch refused %d times", currentF.refused)
	}
}

// Status shows each account's lease: owner, epoch and expiry while held;
// no owner, and for how long, once it lapsed.
func TestStatusShowsLeases(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	if _, _, err := st.AcquireLease(ctx, "acc", "host:1", time.Minute, ""); err != nil {
		t.Fatal(err)
	}
	rep, err := st.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Accounts) != 1 {
		t.Fatalf("accounts %+v", rep.Accounts)
	}
	a := rep.Accounts[0]
	if a.Owner != "host:1" || a.Epoch != 1 || a.LeaseUntil == nil || time.Until(*a.LeaseUntil) < 50*time.Second || a.OwnerlessSeconds != 0 {
		t.Errorf("held lease in status = %+v", a)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE accounts SET lease_until = now() - interval '12 seconds'`); err != nil {
		t.Fatal(err)
	}
	rep, err = st.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a := rep.Accounts[0]; a.Owner != "" || a.Epoch != 1 || a.OwnerlessSeconds < 12 || a.OwnerlessSeconds > 60 {
		t.Errorf("lapsed lease in status = %+v; want no owner for about 12s", a)
	}
}

// An acquisition writes the holder's configuration with the lease and
// returns the one it replaced; a mismatch recorded against the holder's
// configuration shows in the status until the account is taken with
// another one, and keeps the time it was first found while it lasts.
func TestLeaseCarriesTheHoldersConfiguration(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := context.Background()
	one := store.AccountConfig{Fingerprint: "f1", Summary: "sources: 1"}
	two := store.AccountConfig{Fingerprint: "f2", Summary: "sources: 2"}
	a, ok, err := st.AcquireLeaseWith(ctx, "acc", "a", time.Minute, "", one)
	if err != nil || !ok || a.PrevConfig != (store.AccountConfig{}) {
		t.Fatalf("first acquisition = %+v, %v, %v", a, ok, err)
	}
	l, err := st.Lease(ctx, "acc")
	if err != nil || l.Config != one || l.ConfigBy != "a" {
		t.Fatalf("lease = %+v, %v; want a's configuration", l, err)
	}
	m := store.ConfigMismatch{Account: "acc", Instance: "b", Holder: "a", HolderFingerprint: "f1", Fingerprint: "f2", Differs: "sources: here 2, holder 1"}
	if err := st.RecordConfigMismatch(ctx, m, time.Minute); err != nil {
		t.Fatal(err)
	}
	first := mismatches(t, st)
	if len(first) != 1 || first[0].Instance != "b" || first[0].Differs != m.Differs {
		t.Fatalf("status mismatches = %+v, want b's", first)
	}
	if err := st.RecordConfigMismatch(ctx, m, time.Minute); err != nil {
		t.Fatal(err)
	}
	if again := mismatches(t, st); len(again) != 1 || !again[0].Since.Equal(first[0].Since) {
		t.Errorf("the same mismatch recorded again: %+v, want since %v kept", again, first[0].Since)
	}
	// An instance that stopped renewing its record (restarted under
	// another name, or gone) is no longer shown.
	gone := m
	gone.Instance = "gone"
	if err := st.RecordConfigMismatch(ctx, gone, -time.Second); err != nil {
		t.Fatal(err)
	}
	if shown := mismatches(t, st); len(shown) != 1 || shown[0].Instance != "b" {
		t.Errorf("status mismatches with one past its until = %+v, want b's alone", shown)
	}
	// b takes the account over with its configuration: a's record of the
	// past pair no longer holds, nor does b's own.
	if err := st.ReleaseLease(ctx, "acc", "a", a.Epoch); err != nil {
		t.Fatal(err)
	}
	b, ok, err := st.AcquireLeaseWith(ctx, "acc", "b", time.Minute, "", two)
	if err != nil || !ok || b.PrevConfig != one || b.PrevConfigBy != "a" {
		t.Fatalf("b's acquisition = %+v, %v, %v; want a's configuration before", b, ok, err)
	}
	if err := st.ClearConfigMismatches(ctx, "acc", "b", two.Fingerprint); err != nil {
		t.Fatal(err)
	}
	if left := mismatches(t, st); len(left) != 0 {
		t.Errorf("mismatches after b took the account = %+v, want none", left)
	}
}

func mismatches(t *testing.T, st *store.Store) []store.ConfigMismatch {
	t.Helper()
	rep, err := st.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []store.ConfigMismatch
	for _, a := range rep.Accounts {
		out = append(out, a.ConfigMismatches...)
	}
	return out
}
