package tg

import (
	"errors"
	"fmt"
)

// ErrNotLoggedIn: the account's TDLib session is not logged in (a login
// never finished, or the session was terminated): the daemon cannot run it
// until `stashd login` logs it in again. Errors that say so match it with
// errors.Is.
var ErrNotLoggedIn = errors.New("not logged in")

// Authorization states stashd names (TDLib's authorizationState types).
const (
	AuthStateWaitPhoneNumber = "authorizationStateWaitPhoneNumber"
	AuthStateLoggingOut      = "authorizationStateLoggingOut"
	AuthStateClosed          = "authorizationStateClosed"
)

// NotLoggedInError is a start of account refused because its session is
// not logged in; State is TDLib's authorization state. It matches
// ErrNotLoggedIn.
type NotLoggedInError struct {
	Account string
	State   string
}

func (e *NotLoggedInError) Error() string {
	return fmt.Sprintf("account %s is not logged in (%s): run stashd login --account %s", e.Account, e.State, e.Account)
}

// Is makes the error match ErrNotLoggedIn.
func (e *NotLoggedInError) Is(target error) bool { return target == ErrNotLoggedIn }

// LoggedOut reports that the session, once ready, was logged out by
// Telegram or another device (authorizationStateLoggingOut: the session
// was terminated elsewhere, or the account was banned); TDLib closes the
// client next and answers nothing more. State is the state that told.
type LoggedOut struct{ State string }

func (LoggedOut) isUpdate() {}
