package demo_test

import (
	"testing"
	"time"

	"stashd/harness/demo"
)

// One of two accounts logged out remotely mid-run and in again later:
// nothing is lost or delivered twice, and the report counts the logout.
func TestLogoutAccountsResume(t *testing.T) {
	t.Parallel()
	rep := run(t, demo.Options{Seed: 7, Duration: 6 * time.Second, Rate: 15, Sources: 3, Accounts: 2, LogoutAccounts: 1})
	check(t, 7, rep)
	if rep.Logouts != 1 {
		t.Errorf("logouts = %d, want 1", rep.Logouts)
	}
}
