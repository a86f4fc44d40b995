package main

import (
	"io"
	"os"
	"strings"
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

// A source whose catalogue is current but whose deliveries are behind
// says so, not a bare "synced"; a backlog's drain reads as a duration at
// the accounts' budget, or as unknown without one.
func TestSourceStateAndDrain(t *testing.T) {
	for _, c := range []struct {
		s    store.SourceStatus
		want string
	}{
		{store.SourceStatus{State: "synced"}, "synced"},
		{store.SourceStatus{State: store.SourceDelivering, DeliveriesDue: 7}, "catalogue synced, 7 deliveries waiting"},
		{store.SourceStatus{State: "dirty", DirtyReason: "overflow", DeliveriesDue: 7}, "dirty (overflow)"},
	} {
		if got := sourceState(c.s); got != c.want {
			t.Errorf("sourceState(%+v) = %q, want %q", c.s, got, c.want)
		}
	}
	b := store.DestinationBacklog{Parts: 90, SendRate: 20, DrainSeconds: 270}
	if got := drainText(b); got != "~4m30s" {
		t.Errorf("drainText(%+v) = %q, want ~4m30s", b, got)
	}
	if got := drainText(store.DestinationBacklog{Parts: 3}); got != "unknown (no send budget recorded)" {
		t.Errorf("drain without a send budget = %q", got)
	}
}

// An account that holds its lease but cannot reach Telegram is named under
// the accounts table, with the hint.
func TestStatusNamesAnUnreachableAccount(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	printStatus(store.Status{Accounts: []store.AccountStatus{
		{Name: "main", Owner: "host:1", Connected: false},
		{Name: "other", Owner: "host:1", Connected: true},
	}})
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if !strings.Contains(string(out), "account main cannot reach Telegram") || !strings.Contains(string(out), "proxy") {
		t.Errorf("status does not name the unreachable account:\n%s", out)
	}
	if strings.Contains(string(out), "account other cannot") {
		t.Errorf("status names a connected account:\n%s", out)
	}
}

// An instance configured otherwise than the account's lease holder is
// named, with the holder and what differs.
func TestStatusNamesAnInstanceConfiguredOtherwise(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	printStatus(store.Status{Accounts: []store.AccountStatus{
		{Name: "main", Owner: "one", Connected: true, ConfigMismatches: []store.ConfigMismatch{{Account: "main", Instance: "two",
			Holder: "one", Differs: "route r: here 1 -> 3, holder 1 -> 2", Since: time.Now()}}},
	}})
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if !strings.Contains(string(out), "account main: instance two is configured otherwise than one") ||
		!strings.Contains(string(out), "route r: here 1 -> 3, holder 1 -> 2") {
		t.Errorf("status does not name the instance configured otherwise:\n%s", out)
	}
}

// A source title or error from Telegram holding a bidi override, a
// zero-width space or a control character is shown escaped, never raw.
func TestStatusEscapesHiddenCharacters(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	printStatus(store.Status{Sources: []store.SourceStatus{
		{ChatID: -1001, Account: "main", Title: "invoice\u202efdp.zip\u200b\x1b[31m", LastError: "bad\nname"},
	}})
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	for _, raw := range []string{"\u202e", "\u200b", "\x1b", "bad\nname"} {
		if strings.Contains(string(out), raw) {
			t.Errorf("status prints %q raw:\n%s", raw, out)
		}
	}
	for _, esc := range []string{`\u202e`, `\u200b`, `\x1b`, `bad\nname`} {
		if !strings.Contains(string(out), esc) {
			t.Errorf("status does not show %s escaped:\n%s", esc, out)
		}
	}
}

// An account found not logged in is named with its state, the reason and
// the command that logs it in; a logged-in one is not.
func TestStatusNamesAccountNotLoggedIn(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	since := time.Now().Add(-time.Minute)
	printStatus(store.Status{Logins: []store.AccountAuth{
		{Account: "main", State: "authorizationStateLoggingOut", Since: since,
			Reason: "the session was logged out remotely (terminated from another device, or the account banned): run stashd login --account main"},
		{Account: "other", LoggedIn: true, Since: since},
	}})
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if !strings.Contains(string(out), "account main is not logged in (authorizationStateLoggingOut") ||
		!strings.Contains(string(out), "run stashd login --account main") {
		t.Errorf("status does not name the logged-out account and the fix:\n%s", out)
	}
	if strings.Contains(string(out), "account other is not") {
		t.Errorf("status names a logged-in account:\n%s", out)
	}
}
