package store_test

import (
	"errors"
	"testing"
	"time"

	"stashd/store"
	"stashd/tg"
)

// A source taken over from an account that stopped reading it (logged
// out, lost the chat) in the middle of a catch-up scan, on another
// instance: that scan's claim is the old account's, and must not keep the
// new account's catch-up off the source until it expires (ten minutes by
// default). Messages posted meanwhile would wait that long.
func TestSourceTakenOverIsClaimableAtOnce(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	const chat = tg.ChatID(-4343)
	for _, a := range []string{"old", "new"} {
		if err := st.UpsertAccount(ctx, a, 0, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.EnsureSource(ctx, store.Source{ChatID: chat, Account: "old"}); err != nil {
		t.Fatal(err)
	}
	claimed, err := st.ClaimSources(ctx, "old", "instance-one", []tg.ChatID{chat}, 10*time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("the old account's claim = %v, %v; want the source", claimed, err)
	}
	if moved, err := st.TakeSource(ctx, chat, "old", "new"); err != nil || !moved {
		t.Fatalf("take the source over = %v, %v", moved, err)
	}
	// The old account's scan ends after the move, failing as a logged-out
	// account's requests do: its outcome is not the source's any more.
	failed := store.ScanOutcome{Err: errors.New("unauthorized"), Permanent: true, Account: "old"}
	if _, err := st.FinishScan(ctx, chat, "instance-one", failed, store.ScanPolicy{CircuitBase: time.Hour, MaxDelay: time.Hour}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the old account's scan finishing after the move = %v; want it refused as no longer the source's", err)
	}
	src, err := st.GetSource(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	if !src.CircuitUntil.IsZero() || src.LastError != "" {
		t.Errorf("the source taken over carries the old account's failed scan: circuit until %v, error %q", src.CircuitUntil, src.LastError)
	}
	claimed, err = st.ClaimSources(ctx, "new", "instance-two", []tg.ChatID{chat}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 {
		t.Fatalf("the new account's catch-up on another instance claimed %d sources; want the source taken over, "+
			"not kept off it by the old account's claim", len(claimed))
	}
}
