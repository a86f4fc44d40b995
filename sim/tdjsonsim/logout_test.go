package tdjsonsim_test

import (
	"testing"

	"stashd/sim/tgsim"
)

// A session terminated on Telegram's side reports loggingOut, then
// closing and closed, as TDLib does; a new instance on the same database
// waits for a phone number until the account is logged in again, then
// starts ready.
func TestRemoteLogoutOnTheJSONFace(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 7})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")

	w.LogOut("acct1")
	var states []string
	for len(states) == 0 || states[len(states)-1] != "authorizationStateClosed" {
		o, _ := c.until("authorization state", func(o tdObject) bool { return o.typ() == "updateAuthorizationState" })
		states = append(states, o.str("authorization_state", "@type"))
	}
	want := []string{"authorizationStateLoggingOut", "authorizationStateClosing", "authorizationStateClosed"}
	if len(states) != len(want) || states[0] != want[0] || states[1] != want[1] {
		t.Fatalf("authorization states after a remote logout: %v, want %v", states, want)
	}

	// A new instance on the same database: not logged in.
	c.ok(2, "setTdlibParameters", tdlibParameters(w.dir, "acct1"), "ok")
	if o := c.update(2, "updateAuthorizationState"); o.str("authorization_state", "@type") != "authorizationStateWaitPhoneNumber" {
		t.Fatalf("new instance after the logout: %v, want authorizationStateWaitPhoneNumber", o)
	}
	if res, _ := c.call(2, "getMe", nil); res.typ() != "error" || res.int("code") != 401 {
		t.Errorf("getMe while logged out: %v", res)
	}

	c.ok(2, "close", nil, "ok")
	c.until("instance 2 closed", func(o tdObject) bool {
		return o.typ() == "updateAuthorizationState" && o.int("@client_id") == 2 && o.str("authorization_state", "@type") == "authorizationStateClosed"
	})

	w.LogIn("acct1")
	c.ok(3, "setTdlibParameters", tdlibParameters(w.dir, "acct1"), "ok")
	if o := c.update(3, "updateAuthorizationState"); o.str("authorization_state", "@type") != "authorizationStateReady" {
		t.Fatalf("new instance after logging in again: %v, want authorizationStateReady", o)
	}
	c.ok(3, "getMe", nil, "user")
}
