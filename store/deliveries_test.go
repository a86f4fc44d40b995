package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"stashd/store"
	"stashd/tg"
)

// DeliveryByToken finds a delivery by the token its caption carries, in
// its destination only, with its state and message once sent.
func TestDeliveryByToken(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	id := onePartPackage(t, st, "t1", 7, 1<<20)
	d, _, err := st.EnsureIntent(ctx, id, -9, 0, "a")
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := st.DeliveryByToken(ctx, d.Token, -9)
	if err != nil || !ok || got.PackageID != id || got.PartIndex != 0 || got.State != store.DeliveryIntent || got.DestMessageID != 0 || got.Account != "a" {
		t.Fatalf("intent by token = %+v, %v, %v", got, ok, err)
	}
	if rec, err := st.MarkSent(ctx, d, tg.MessageIDFromServer(5)); err != nil || rec != tg.MessageIDFromServer(5) {
		t.Fatalf("first MarkSent recorded %v, %v; want message 5", rec, err)
	}
	// A second copy of the part: the delivery keeps the first, and says so.
	if rec, err := st.MarkSent(ctx, d, tg.MessageIDFromServer(6)); err != nil || rec != tg.MessageIDFromServer(5) {
		t.Fatalf("MarkSent of a second copy recorded %v, %v; want message 5 kept", rec, err)
	}
	got, ok, err = st.DeliveryByToken(ctx, d.Token, -9)
	if err != nil || !ok || got.State != store.DeliverySent || got.DestMessageID != tg.MessageIDFromServer(5) {
		t.Fatalf("sent delivery by token = %+v, %v, %v", got, ok, err)
	}
	if _, ok, err := st.DeliveryByToken(ctx, d.Token, -10); err != nil || ok {
		t.Errorf("token in another destination = %v, %v; want none", ok, err)
	}
	if _, ok, err := st.DeliveryByToken(ctx, "nope", -9); err != nil || ok {
		t.Errorf("unknown token = %v, %v; want none", ok, err)
	}
}

// Intents written with a lock taken ahead are written only when the
// attempt takes the lock, come back fresh with their tokens once it did,
// and DropIntents deletes them while they are intents, never a record of
// a send, and only while the lock is still its holder's.
func TestIntentsAheadOnlyUnderTheLock(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	hash := make([]byte, 32)
	hash[0] = 8
	pkg := store.Package{ContentHash: hash, Name: "s.rar", Format: "rar", TotalSize: 3, PartCount: 3,
		Origin: tg.MessageKey{Chat: -1, Message: 2 << 20}}
	var parts []store.Part
	for i := range 3 {
		parts = append(parts, store.Part{Index: i, FileName: fmt.Sprintf("s.part%d.rar", i+1), Size: 1, SHA256: hash,
			UniqueID: fmt.Sprintf("s%d", i), Source: tg.MessageKey{Chat: -1, Message: tg.MessageID(2<<20 + i)}})
	}
	id, _, err := st.CreatePackage(ctx, pkg, parts, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := func() (n int) {
		t.Helper()
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE package_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Part 2 was sent by an earlier delivery.
	d2, _, err := st.EnsureIntent(ctx, id, -9, 2, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkSent(ctx, d2, tg.MessageIDFromServer(7)); err != nil {
		t.Fatal(err)
	}

	// Another holder has the lock: nothing is written.
	other, err := st.Lock(ctx, "d:held")
	if err != nil {
		t.Fatal(err)
	}
	carrier, err := st.Lock(ctx, "d:carrier")
	if err != nil {
		t.Fatal(err)
	}
	refused := st.LockAhead("d:held")
	refused.WithIntents(ctx, id, -9, []int{0, 1}, "a")
	if err := carrier.UnlockWith(ctx, refused.Statements()...); err != nil {
		t.Fatal(err)
	}
	if l := refused.Take(); l != nil {
		t.Fatal("a lock another holder has was taken ahead")
	}
	if n := rows(); n != 1 {
		t.Fatalf("%d delivery rows after an attempt that did not take the lock, want 1 (the sent part)", n)
	}
	other.Unlock()

	carrier, err = st.Lock(ctx, "d:carrier")
	if err != nil {
		t.Fatal(err)
	}
	ahead := st.LockAhead("d:free")
	ia := ahead.WithIntents(ctx, id, -9, []int{0, 1, 2}, "a")
	if err := carrier.UnlockWith(ctx, ahead.Statements()...); err != nil {
		t.Fatal(err)
	}
	l := ahead.Take()
	if l == nil {
		t.Fatal("a free lock was not taken ahead")
	}
	ins := ia.Intents()
	if len(ins) != 3 {
		t.Fatalf("%d intents read, want 3: %+v", len(ins), ins)
	}
	var tokens []string
	for i, in := range ins {
		if in.PartIndex != i || in.Destination != -9 {
			t.Fatalf("intent %d is %+v", i, in)
		}
		if fresh := i < 2; in.Fresh != fresh || in.Token == "" {
			t.Errorf("part %d: fresh %v token %q, want fresh %v and a token", i, in.Fresh, in.Token, fresh)
		}
		if i == 2 && (in.State != store.DeliverySent || in.DestMessageID != tg.MessageIDFromServer(7)) {
			t.Errorf("the sent part read as %+v", in)
		}
		tokens = append(tokens, in.Token)
	}
	// Dropped only while the lock is still this holder's.
	drop := l.DropIntents(tokens)
	l.Unlock()
	taker, err := st.Lock(ctx, "d:free")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(ctx, drop); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 3 {
		t.Fatalf("%d delivery rows after a drop under a lock another holder took, want 3", n)
	}
	if err := st.Commit(ctx, taker.DropIntents(tokens)); err != nil {
		t.Fatal(err)
	}
	taker.Unlock()
	if n := rows(); n != 1 {
		t.Fatalf("%d delivery rows after the drop, want the sent part's alone", n)
	}
}

// The intents' statement looks up a part's file by package and index
// (the group commit's generic plan), then its copy in the destination: not
// by reading remote_files whole, nor every copy in the destination, each
// of which would make every delivery slower as the catalogue grows.
func TestIntentFindsPartFilesByIndex(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	if _, err := st.Pool().Exec(ctx, `
		INSERT INTO packages (content_hash, name, format, total_size, part_count, origin_chat_id, origin_message_id)
		SELECT sha256(i::text::bytea), 'p' || i, 'tar', 1, 1, -1, i FROM generate_series(1, 20000) i;
		INSERT INTO remote_files SELECT 'u' || id, id, 0 FROM packages;
		INSERT INTO destination_copies (destination_chat_id, unique_id, dest_message_id, token)
			SELECT -7, unique_id, package_id, 't' || package_id FROM remote_files WHERE package_id % 4 = 0;
		ANALYZE packages, remote_files, destination_copies`); err != nil {
		t.Fatal(err)
	}
	if text := genericPlan(t, st, store.IntentSQL()); !strings.Contains(text, "Index Scan using remote_files_package on remote_files") {
		t.Errorf("the intents' statement does not look its part's file up by package:\n%s", text)
	}
}

// A delivery taken over by another account starts its attempts from 0:
// the failures counted were the first account's. Waiting again with the
// same account (a route's window) keeps them.
func TestHandedDeliveryStartsItsAttemptsAnew(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	id := onePartPackage(t, st, "h1", 7, 1<<20)
	w := store.Waiting{PackageID: id, Destination: -9, Account: "a", Route: "r", OpensAt: time.Now(),
		Parts: []tg.MessageKey{{Chat: -1, Message: tg.MessageIDFromServer(7)}}, PartCount: 1}
	if err := st.WaitDelivery(ctx, w); err != nil {
		t.Fatal(err)
	}
	attempts := func() int {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT attempts FROM waiting_deliveries WHERE package_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 3 {
		if err := st.DeferDelivery(ctx, id, -9, time.Now(), "flood wait"); err != nil {
			t.Fatal(err)
		}
	}
	if n := attempts(); n != 3 {
		t.Fatalf("attempts %d after three deferrals, want 3", n)
	}
	if err := st.WaitDelivery(ctx, w); err != nil { // the same account, a window
		t.Fatal(err)
	}
	if n := attempts(); n != 3 {
		t.Errorf("attempts %d after waiting again with the same account, want 3 kept", n)
	}
	w.Account, w.Route = "b", "(handed over)"
	if err := st.WaitDelivery(ctx, w); err != nil {
		t.Fatal(err)
	}
	if n := attempts(); n != 0 {
		t.Errorf("attempts %d once handed to another account, want 0", n)
	}
}
