package chaos

import (
	"testing"
	"time"
)

func TestLeaseWatch(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type reading struct {
		now          float64
		owner        string
		until        float64 // seconds after t0; negative: NULL
		failovers    int     // after the reading
		longestTenth int     // longest ownerless stretch after the reading, in tenths of a second
	}
	for _, tc := range []struct {
		name     string
		readings []reading
	}{
		{"before the first owner", []reading{
			{0, "", -1, 0, 0},
			{5, "", -1, 0, 0},
			{6, "h:1", 9, 0, 0},
		}},
		{"renewals", []reading{
			{0, "h:1", 3, 0, 0},
			{1, "h:1", 4, 0, 0},
			{2, "h:1", 5, 0, 0},
		}},
		{"dead owner taken at once", []reading{
			{0, "h:1", 3, 0, 0},
			{1, "h:2", 4, 1, 0},
			{2, "h:3", 5, 2, 0},
		}},
		{"paused owner's lease lapses", []reading{
			{0, "h:1", 3, 0, 0},
			{3.5, "h:1", 3, 0, 5},
			{4, "h:2", 7, 1, 10},
			{5, "h:2", 8, 1, 10},
		}},
		{"taken over between readings", []reading{
			{2.9, "h:1", 3, 0, 0},
			{3.2, "h:2", 6, 1, 2},
		}},
		{"released, then taken by another", []reading{
			{0, "h:1", 3, 0, 0},
			{1.1, "", 1, 0, 1},
			{1.3, "h:2", 4, 1, 3},
		}},
		{"released, then taken again by the same owner", []reading{
			{0, "h:1", 3, 0, 0},
			{1.5, "", 1, 0, 5},
			{2, "h:1", 5, 0, 10},
		}},
		{"owner, nobody, nobody, other counts once", []reading{
			{0, "h:1", 3, 0, 0},
			{3.5, "", 3, 0, 5},
			{4.5, "h:1", 3, 0, 15},
			{5, "h:2", 8, 1, 20},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newLeaseWatch()
			for i, r := range tc.readings {
				row := leaseRow{account: "acct1", owner: r.owner}
				if r.until >= 0 {
					row.until = at(r.until)
				}
				// A second account, owned throughout, changes nothing.
				w.observe(at(r.now), []leaseRow{row, {account: "acct2", owner: "h:9", until: at(r.now + 3)}})
				failovers, longest := w.result()
				if failovers != r.failovers || longest != time.Duration(r.longestTenth)*100*time.Millisecond {
					t.Fatalf("after reading %d: failovers %d, longest ownerless %v; want %d, %v",
						i, failovers, longest, r.failovers, time.Duration(r.longestTenth)*100*time.Millisecond)
				}
			}
		})
	}
}

func TestOwnerPID(t *testing.T) {
	t.Parallel()
	for owner, want := range map[string]int{"host:42": 42, "a:b:7": 7, "host": 0, "host:": 0, "host:x": 0, "host:-3": 0} {
		if got, ok := ownerPID(owner); got != want && ok || ok != (want > 0) {
			t.Errorf("ownerPID(%q) = %d, %v; want %d", owner, got, ok, want)
		}
	}
}

// A loss is an owner losing an account: its lease lapsing, going to
// another owner, or taken again under a new epoch by the same owner (a
// daemon that fenced itself and started the account over). Renewals are
// not losses.
func TestLeaseWatchLosses(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	w := newLeaseWatch()
	read := func(now float64, owner string, until float64, epoch int64) {
		w.observe(at(now), []leaseRow{{account: "acct1", owner: owner, until: at(until), epoch: epoch}})
	}
	read(0, "h:1", 3, 1)
	read(1, "h:1", 4, 1) // renewal
	read(2, "h:1", 5, 2) // the same owner, a new epoch: lost and taken again
	read(3, "h:2", 6, 3) // another owner took it
	read(7, "h:2", 6, 3) // lapsed
	read(8, "h:3", 11, 4)
	read(9, "h:3", 12, 4)
	got := w.lost()
	want := []leaseLoss{{"acct1", "h:1", at(2)}, {"acct1", "h:1", at(3)}, {"acct1", "h:2", at(7)}}
	if len(got) != len(want) {
		t.Fatalf("losses %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("loss %d: %v, want %v", i, got[i], want[i])
		}
	}
}
