//go:build libtdjson

package tdjsonsim_test

import (
	"errors"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
	"stashd/tg/tdlib"
)

// A session terminated remotely reaches the adapter's consumer as
// tg.LoggedOut, then the update stream ends as TDLib closes; a new client
// is not logged in (tg.ErrNotLoggedIn) until the account logs in again.
func TestRemoteLogoutThroughTheAdapter(t *testing.T) {
	w := tgsim.NewWorld(tgsim.Config{Seed: 3})
	w.AddAccount("acct1", false)
	dir := serveStandIn(t, w)
	cfg := standinConfig(dir, "acct1")
	c, err := tdlib.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w.LogOut("acct1")
	deadline := time.After(30 * time.Second)
	var sawLogout bool
	for open := true; open; {
		select {
		case u, ok := <-c.Updates():
			if !ok {
				open = false
				break
			}
			if lo, isLogout := u.(tg.LoggedOut); isLogout && lo.State == tg.AuthStateLoggingOut {
				sawLogout = true
			}
		case <-deadline:
			t.Fatal("the update stream did not end after a remote logout")
		}
	}
	if !sawLogout {
		t.Fatal("no tg.LoggedOut before the update stream ended")
	}
	_ = c.Close()

	if _, err := tdlib.New(t.Context(), cfg); !errors.Is(err, tg.ErrNotLoggedIn) {
		t.Fatalf("new client after the logout: %v, want tg.ErrNotLoggedIn", err)
	}
	w.LogIn("acct1")
	c2, err := tdlib.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("new client after logging in again: %v", err)
	}
	defer c2.Close()
	if _, err := c2.GetMe(t.Context()); err != nil {
		t.Fatal(err)
	}
}
