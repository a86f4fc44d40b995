package main

import (
	"testing"
	"time"

	"stashd/store"
)

// An account's lease reads as its expiry while held, and as how long it
// has had no owner once it lapsed or was released.
func TestLeaseState(t *testing.T) {
	until := time.Date(2026, 1, 2, 15, 4, 5, 0, time.Local)
	for _, c := range []struct {
		a    store.AccountStatus
		want string
	}{
		{store.AccountStatus{}, "never taken"},
		{store.AccountStatus{Owner: "host:1", Epoch: 3, LeaseUntil: &until}, "until 15:04:05"},
		{store.AccountStatus{Epoch: 3, LeaseUntil: &until, OwnerlessSeconds: 12.3}, "no owner for 12s"},
	} {
		if got := leaseState(c.a); got != c.want {
			t.Errorf("leaseState(%+v) = %q, want %q", c.a, got, c.want)
		}
	}
}
