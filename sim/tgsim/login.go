package tgsim

import "fmt"

// LoginCode is the login code the simulated Telegram "sends" to every
// account that logs in by phone number.
const LoginCode = "12345"

// login is an account's login requirement (RequireLogin).
type login struct {
	password string
	// done holds the database directories the account has logged in on.
	done map[string]bool
}

// RequireLogin makes account log in before its TDLib sessions are ready:
// a session on a database directory the account has not logged in on yet
// waits for a phone number and LoginCode, or for a QR-code login confirmed
// from another device, then for password when it is not empty (two-step
// verification). Without it, every session of a known account starts
// logged in.
func (w *World) RequireLogin(account, password string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	a.login = &login{password: password, done: map[string]bool{}}
}

// NeedsLogin reports whether a session of account on database directory
// dir must log in first (RequireLogin), and whether a two-step password
// follows the code or the QR confirmation. It panics on an unknown account,
// like every set-up method.
func (w *World) NeedsLogin(account, dir string) (needed, password bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	if a.loggedOut {
		// A terminated session asks for the phone number again.
		return true, a.login != nil && a.login.password != ""
	}
	if a.login == nil || a.login.done[dir] {
		return false, false
	}
	return true, a.login.password != ""
}

// CheckPassword reports whether password is account's two-step password.
func (w *World) CheckPassword(account, password string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	return a.login != nil && a.login.password == password
}

// LoggedIn records that account logged in on database directory dir: its
// later sessions there start logged in, as TDLib's do.
func (w *World) LoggedIn(account, dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	a.loggedOut = false
	if a.login != nil {
		a.login.done[dir] = true
	}
}

// QRLink is the tg://login link of account's n-th QR-code login request.
func (w *World) QRLink(account string, n int) string {
	return fmt.Sprintf("tg://login?token=c2ltdWxhdGVk-%s-%d", account, n)
}
