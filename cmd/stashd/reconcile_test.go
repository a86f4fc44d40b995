package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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

// The wait ends for a destination given up (exit 1) and for one no running
// account takes up; with no daemon running it goes on waiting.
func TestReconcileWaitEnds(t *testing.T) {
	dbURL := pgtest.New(t)
	ctx := t.Context()
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer func(d time.Duration) { unservedAfter = d }(unservedAfter)
	unservedAfter = 500 * time.Millisecond

	// Nothing holds a lease: no daemon, the wait goes on until stopped.
	if err := st.RequestReconcile(ctx, []tg.ChatID{-1003}, "test"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if code := waitReconciles(short, st, []tg.ChatID{-1003}); code != 1 || short.Err() == nil {
		t.Errorf("with no daemon running: exit %d before the wait was stopped (%v)", code, short.Err())
	}

	// A daemon runs (it holds a lease) but takes -1003 up in no round.
	if _, ok, err := st.AcquireLease(ctx, "a", "instance-1", time.Minute, ""); err != nil || !ok {
		t.Fatalf("acquire a lease: %v, %v", ok, err)
	}
	if code := waitReconciles(ctx, st, []tg.ChatID{-1003}); code != 0 {
		t.Errorf("destination no running account serves: exit %d, want 0", code)
	}

	// Given up: the wait ends with exit 1.
	if err := st.GiveUpReconcile(ctx, -1003, errors.New("CHANNEL_PRIVATE")); err != nil {
		t.Fatal(err)
	}
	if code := waitReconciles(ctx, st, []tg.ChatID{-1003}); code != 1 {
		t.Errorf("given up: exit %d, want 1", code)
	}
}

// stashd status names the destinations whose sends wait for a
// reconciliation, and those given up with the reason.
func TestStatusShowsReconciles(t *testing.T) {
	dbURL := pgtest.New(t)
	ctx := t.Context()
	st, err := store.Open(ctx, store.Config{URL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.RequestReconcile(ctx, []tg.ChatID{-1002, -1003}, "database timeline changed"); err != nil {
		t.Fatal(err)
	}
	if err := st.GiveUpReconcile(ctx, -1003, errors.New("CHANNEL_PRIVATE")); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, t.TempDir(), nil, "status", "--database-url", dbURL)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"destination -1002: sends wait for its reconciliation (database timeline changed)",
		"destination -1003: reconciliation after a rewind gave up, its history cannot be read (CHANNEL_PRIVATE)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}
