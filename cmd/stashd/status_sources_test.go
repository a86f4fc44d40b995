package main

import (
	"testing"

	"stashd/store"
)

// A public source read without joining is shown as such, not as a fault.
func TestSourceStateNotMember(t *testing.T) {
	s := store.SourceStatus{State: "synced", Access: store.AccessNotMember}
	if got, want := sourceState(s), "synced, not a member (kept open for updates)"; got != want {
		t.Errorf("sourceState = %q, want %q", got, want)
	}
}
