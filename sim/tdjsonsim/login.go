package tdjsonsim

import (
	"strings"
	"time"

	"stashd/sim/tgsim"
)

// The authorization states of a login (tgsim's World.RequireLogin).
const (
	stateWaitCode        = "authorizationStateWaitCode"
	stateWaitOtherDevice = "authorizationStateWaitOtherDeviceConfirmation"
	stateWaitPassword    = "authorizationStateWaitPassword"
)

// QRConfirmDelay is how long after showing a QR-code link the simulated
// "other device" confirms the login.
const QRConfirmDelay = 300 * time.Millisecond

// loginState is a session's login in progress.
type loginState struct {
	dir      string
	filesDir string // the instance's files directory (setTdlibParameters)
	password bool   // a two-step password follows the first factor
	qr       int    // QR-code links shown so far
	phone    string
}

// needsLogin reports whether account must log in on dir first; an
// account the world does not know needs none here (it never becomes
// ready, as before).
func needsLogin(w *tgsim.World, account, dir string) (need, password bool) {
	defer func() {
		if r := recover(); r != nil {
			msg, ok := r.(string)
			if !ok || !strings.HasPrefix(msg, "tgsim: unknown account") {
				panic(r)
			}
			need, password = false, false
		}
	}()
	return w.NeedsLogin(account, dir)
}

// authStateObject is the current authorization state as TDLib writes it,
// with s.mu held.
func (s *session) authStateObject() object {
	switch s.state {
	case stateWaitCode:
		return object{{"@type", stateWaitCode}, {"code_info", object{
			{"@type", "authenticationCodeInfo"},
			{"phone_number", s.login.phone},
			{"type", object{{"@type", "authenticationCodeTypeTelegramMessage"}, {"length", len(tgsim.LoginCode)}}},
			{"timeout", 0},
		}}}
	case stateWaitOtherDevice:
		return object{{"@type", stateWaitOtherDevice}, {"link", s.c.s.world.QRLink(s.account, s.login.qr)}}
	case stateWaitPassword:
		return object{{"@type", stateWaitPassword}, {"password_hint", "simulated"}, {"has_recovery_email_address", false},
			{"has_passport_data", false}, {"recovery_email_address_pattern", ""}}
	}
	return authorizationStateObject(s.state)
}

// setAuthState moves to state and reports it, with s.mu held.
func (s *session) setAuthState(state string) {
	s.state = state
	s.c.send(s.id, object{{"@type", "updateAuthorizationState"}, {"authorization_state", s.authStateObject()}})
}

// loginStep answers the requests of a login: a phone number then the
// code, or a QR-code request (confirmed after QRConfirmDelay), then the
// two-step password when the account has one.
func (s *session) loginStep(r *request) (object, error) {
	var p struct {
		PhoneNumber string `json:"phone_number"`
		Code        string `json:"code"`
		Password    string `json:"password"`
	}
	if err := r.params(&p); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.login == nil {
		if s.state == stateWaitPhoneNumber {
			return nil, tdError(400, "tdjsonsim: account %q does not exist in the simulated world", s.account)
		}
		return nil, tdError(400, "Call to %s unexpected", r.Type)
	}
	switch {
	case r.Type == "setAuthenticationPhoneNumber" && s.state == stateWaitPhoneNumber:
		if p.PhoneNumber == "" {
			return nil, tdError(400, "PHONE_NUMBER_INVALID")
		}
		s.login.phone = p.PhoneNumber
		s.setAuthState(stateWaitCode)
	case r.Type == "requestQrCodeAuthentication" && (s.state == stateWaitPhoneNumber || s.state == stateWaitOtherDevice):
		s.login.qr++
		n := s.login.qr
		s.setAuthState(stateWaitOtherDevice)
		time.AfterFunc(QRConfirmDelay, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.state == stateWaitOtherDevice && s.login != nil && s.login.qr == n {
				s.firstFactorDone()
			}
		})
	case r.Type == "checkAuthenticationCode" && s.state == stateWaitCode:
		if p.Code != tgsim.LoginCode {
			return nil, tdError(400, "PHONE_CODE_INVALID")
		}
		s.firstFactorDone()
	case r.Type == "checkAuthenticationPassword" && s.state == stateWaitPassword:
		if !s.c.s.world.CheckPassword(s.account, p.Password) {
			return nil, tdError(400, "PASSWORD_HASH_INVALID")
		}
		s.loggedIn()
	default:
		return nil, tdError(400, "Call to %s unexpected", r.Type)
	}
	return okObject(), nil
}

// firstFactorDone follows a code or a QR confirmation, with s.mu held.
func (s *session) firstFactorDone() {
	if s.login.password {
		s.setAuthState(stateWaitPassword)
		return
	}
	s.loggedIn()
}

// loggedIn records the login on the session's directory and makes the
// session ready, with s.mu held.
func (s *session) loggedIn() {
	dir, files := s.login.dir, s.login.filesDir
	s.login = nil
	s.c.s.world.LoggedIn(s.account, dir)
	cl, ok := worldClient(s.c.s.world, s.account, dir, files)
	if !ok {
		return
	}
	s.becomeReady(cl)
}

// worldClient starts a tgsim client for account on the database directory
// dir with its downloads in filesDir, or reports that the world has no
// such account. tgsim offers no lookup that does not panic on an unknown
// name (World.Client, World.Calls), so that one panic is turned back into
// an answer here; any other panic goes on.
func worldClient(w *tgsim.World, account, dir, filesDir string) (cl *tgsim.Client, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			msg, isString := r.(string)
			if !isString || !strings.HasPrefix(msg, "tgsim: unknown account") {
				panic(r)
			}
			cl, ok = nil, false
		}
	}()
	return w.ClientWithFiles(account, dir, filesDir), true
}
