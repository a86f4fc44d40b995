package chaos

import (
	"testing"
	"time"

	"stashd/harness/audit"
	"stashd/sim/tgsim"
)

// Only a request of the paused instance's sessions, from its freeze to a
// moment after its continue, is a request in flight at the freeze; every
// other overlap stays and fails the run.
func TestOverlapsExcusedOnlyWhenInFlightAtAFreeze(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	freezes := []freeze{{dataDir: "/run/chaos/serve-1", from: t0, to: t0.Add(6 * time.Second)}}
	overlap := func(dir string, after time.Duration) tgsim.SessionOverlap {
		return tgsim.SessionOverlap{Account: "acct2", Older: 4, Newer: 5, Method: "downloadFile", At: t0.Add(after), Dir: dir}
	}
	frozen := "/run/chaos/serve-1/accounts/acct2/database"
	inFlight := overlap(frozen, 6*time.Second+30*time.Millisecond)
	relative := overlap("run/chaos/serve-1/accounts/acct2/database", 6*time.Second+10*time.Millisecond)
	late := overlap(frozen, 6*time.Second+time.Second)
	otherInstance := overlap("/run/chaos/serve-2/accounts/acct2/database", 6*time.Second+30*time.Millisecond)
	prefixOnly := overlap("/run/chaos/serve-10/accounts/acct2/database", 6*time.Second+30*time.Millisecond)
	before := overlap(frozen, -time.Second)
	noDir := overlap("", 6*time.Second+30*time.Millisecond)
	truth := audit.Truth{SessionOverlaps: 9, // two the world counted but did not keep
		OverlapExamples: []tgsim.SessionOverlap{inFlight, late, otherInstance, relative, prefixOnly, before, noDir}}
	if n := excuseFrozen(&truth, freezes); n != 2 {
		t.Errorf("excused %d, want 2 (the frozen instance's requests right after its continue)", n)
	}
	if truth.SessionOverlaps != 7 {
		t.Errorf("overlaps left %d, want 7", truth.SessionOverlaps)
	}
	want := []tgsim.SessionOverlap{late, otherInstance, prefixOnly, before, noDir}
	if len(truth.OverlapExamples) != len(want) {
		t.Fatalf("overlaps kept %v, want %v", truth.OverlapExamples, want)
	}
	for i := range want {
		if truth.OverlapExamples[i] != want[i] {
			t.Errorf("overlap kept %d = %v, want %v", i, truth.OverlapExamples[i], want[i])
		}
	}
}
