package store_test

import (
	"testing"

	"stashd/store"
	"stashd/tg"
)

// DeliveryByToken finds a delivery by the token its caption carries, in
// its destination only, with its state and message once sent.
func TestDeliveryByToken(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	hash := make([]byte, 32)
	hash[0] = 7
	pkg := store.Package{ContentHash: hash, Name: "t.zip", Format: "zip", TotalSize: 1, PartCount: 1,
		Origin: tg.MessageKey{Chat: -1, Message: 1 << 20}}
	id, _, err := st.CreatePackage(ctx, pkg, []store.Part{{Index: 0, FileName: "t.zip", Size: 1, SHA256: hash, UniqueID: "t1", Source: pkg.Origin}}, nil)
	if err != nil {
		t.Fatal(err)
	}
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
