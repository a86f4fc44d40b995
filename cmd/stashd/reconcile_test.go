package main

import (
	"context"
	"strings"
	"testing"

	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// stashd reconcile asks for every destination the catalogue delivered to,
// and those named, to be reconciled: sends to them wait until then.
func TestReconcileRequestsEveryDestination(t *testing.T) {
	dbURL := pgtest.New(t)
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hash := make([]byte, 32)
	hash[0] = 1
	pkg := store.Package{ContentHash: hash, Name: "x.zip", Format: "zip", TotalSize: 1, PartCount: 1,
		Origin: tg.MessageKey{Chat: -1001, Message: 1 << 20}}
	id, _, err := st.CreatePackage(ctx, pkg, []store.Part{{Index: 0, FileName: "x.zip", Size: 1, SHA256: hash, UniqueID: "u", Source: pkg.Origin}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.EnsureIntent(ctx, id, -1002, 0, "a"); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, t.TempDir(), nil, "reconcile", "--no-wait", "--database-url", dbURL, "--destination", "-1003")
	if code != 0 || !strings.Contains(stdout, "asked for 2 destinations") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, d := range []tg.ChatID{-1002, -1003} {
		if pending, err := st.ReconcilePending(ctx, d); err != nil || !pending {
			t.Errorf("destination %d pending: %v, %v", d, pending, err)
		}
	}
	if code, _, stderr := run(t, t.TempDir(), nil, "reconcile", "--no-wait", "--database-url", dbURL, "--destination", "x"); code != 2 || !strings.Contains(stderr, "not a chat id") {
		t.Errorf("--destination x: exit %d, %s", code, stderr)
	}
}
