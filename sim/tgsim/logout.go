package tgsim

import (
	"fmt"

	"stashd/tg"
)

// LogOut terminates account's sessions on Telegram's side, as a session
// ended from another device or a banned account: every live client
// receives authorizationStateLoggingOut (tg.LoggedOut) and answers every
// later request 401 "Unauthorized", as TDLib does until it has closed; a
// session started later is not logged in (Dial fails, and a TDLib-JSON
// session waits for a phone number) until LogIn or a fresh login
// (LoggedIn). It counts in Logouts.
func (w *World) LogOut(account string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	if a.loggedOut {
		return
	}
	a.loggedOut = true
	w.logouts++
	for _, cl := range a.clients {
		cl.revoked = true
		cl.enqueue(tg.LoggedOut{State: tg.AuthStateLoggingOut})
	}
}

// LogIn logs account in again after LogOut, as `stashd login` would: its
// next sessions start ready.
func (w *World) LogIn(account string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mustAccount(account).loggedOut = false
}

// LoggedOutNow reports whether account is logged out (LogOut without a
// LogIn since).
func (w *World) LoggedOutNow(account string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mustAccount(account).loggedOut
}

// Logouts counts the LogOut calls that logged an account out.
func (w *World) Logouts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.logouts
}

// Dial starts a client of account on database directory dir as a process
// start with TDLib's non-interactive login does: an account whose session
// is not logged in (LogOut, or RequireLogin without a login on dir) fails
// with a *tg.NotLoggedInError, after no request to Telegram.
func (w *World) Dial(account, dir string) (*Client, error) {
	if need, _ := w.NeedsLogin(account, dir); need {
		return nil, fmt.Errorf("start account %s: %w", account, &tg.NotLoggedInError{Account: account, State: tg.AuthStateWaitPhoneNumber})
	}
	return w.ClientIn(account, dir), nil
}

// errUnauthorized is Telegram's answer to a request of a session that was
// logged out.
func errUnauthorized() error { return &tg.Error{Code: 401, Message: "Unauthorized"} }
