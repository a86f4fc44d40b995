package tdjsonsim_test

import (
	"testing"

	"stashd/sim/tgsim"
)

// stateAfter returns the authorization state reported with or before the
// answer to a login request.
func stateAfter(t *testing.T, before []tdObject) tdObject {
	t.Helper()
	for i := len(before) - 1; i >= 0; i-- {
		if before[i].typ() == "updateAuthorizationState" {
			return before[i]
		}
	}
	t.Fatalf("no updateAuthorizationState among %v", before)
	return nil
}

// A QR-code login: requestQrCodeAuthentication shows a tg://login link,
// another device confirms, the two-step password follows; the next
// session on the directory starts logged in.
func TestQRCodeLoginWithPassword(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 1})
	w.RequireLogin("acct1", "hunter2")
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.ok(1, "setTdlibParameters", tdlibParameters(w.dir, "acct1"), "ok")
	if st := c.update(1, "updateAuthorizationState"); st.str("authorization_state", "@type") != "authorizationStateWaitPhoneNumber" {
		t.Fatalf("first state: %v", st)
	}
	if res := c.ok(1, "getMe", nil, "error"); res.int("code") != 401 {
		t.Errorf("getMe before login: %v", res)
	}
	res, before := c.call(1, "requestQrCodeAuthentication", map[string]any{"other_user_ids": []int64{}})
	st := stateAfter(t, before)
	if res.typ() != "ok" || st.str("authorization_state", "@type") != "authorizationStateWaitOtherDeviceConfirmation" ||
		st.str("authorization_state", "link") != w.QRLink("acct1", 1) {
		t.Fatalf("after requestQrCodeAuthentication: %v, %v", res, st)
	}
	// The other device confirms; the password is asked.
	if st := c.update(1, "updateAuthorizationState"); st.str("authorization_state", "@type") != "authorizationStateWaitPassword" {
		t.Fatalf("after the confirmation: %v", st)
	}
	if res := c.ok(1, "checkAuthenticationPassword", map[string]any{"password": "wrong"}, "error"); res.str("message") != "PASSWORD_HASH_INVALID" {
		t.Errorf("wrong password: %v", res)
	}
	_, before = c.call(1, "checkAuthenticationPassword", map[string]any{"password": "hunter2"})
	if st := stateAfter(t, before); st.str("authorization_state", "@type") != "authorizationStateReady" {
		t.Fatalf("after the password: %v", st)
	}
	c.ok(1, "getMe", nil, "user")

	// Logged in on that directory: a later session there is ready at once.
	c.ok(1, "close", nil, "ok")
	c2 := dialWire(t, path)
	c2.login(1, w.dir, "acct1")
	c2.ok(1, "getMe", nil, "user")
}

// A phone login: the number, a wrong code refused, the right one.
func TestPhoneLogin(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 1})
	w.RequireLogin("acct1", "")
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.ok(1, "setTdlibParameters", tdlibParameters(w.dir, "acct1"), "ok")
	c.update(1, "updateAuthorizationState")
	_, before := c.call(1, "setAuthenticationPhoneNumber", map[string]any{"phone_number": "+4915112345678", "settings": nil})
	if st := stateAfter(t, before); st.str("authorization_state", "@type") != "authorizationStateWaitCode" ||
		st.str("authorization_state", "code_info", "type", "@type") != "authenticationCodeTypeTelegramMessage" {
		t.Fatalf("after the number: %v", st)
	}
	if res := c.ok(1, "checkAuthenticationCode", map[string]any{"code": "00000"}, "error"); res.str("message") != "PHONE_CODE_INVALID" {
		t.Errorf("wrong code: %v", res)
	}
	_, before = c.call(1, "checkAuthenticationCode", map[string]any{"code": tgsim.LoginCode})
	if st := stateAfter(t, before); st.str("authorization_state", "@type") != "authorizationStateReady" {
		t.Fatalf("after the code: %v", st)
	}
}
