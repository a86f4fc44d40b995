package tgsim

import (
	"errors"
	"fmt"
	"time"

	"stashd/tg"
)

// simError is a TDLib error object (code and message) that also matches one
// of the port's sentinel errors, so callers can test either errors.As(err,
// *tg.Error) or errors.Is(err, tg.ErrChatNotFound).
type simError struct {
	tdErr    *tg.Error
	sentinel error
}

func (e *simError) Error() string   { return e.tdErr.Error() }
func (e *simError) Unwrap() []error { return []error{e.tdErr, e.sentinel} }

func errChatNotFound() error {
	return &simError{tdErr: &tg.Error{Code: 400, Message: "Chat not found"}, sentinel: tg.ErrChatNotFound}
}

// errNoAccess is what a server call answers once the account has lost
// access to a chat that TDLib still knows locally.
func errNoAccess() error {
	return &simError{tdErr: &tg.Error{Code: 400, Message: "Can't access the chat"}, sentinel: tg.ErrNoAccess}
}

// errIgnorable is a 406, which TDLib asks clients to drop silently.
func errProtectedContent() error {
	return &simError{tdErr: &tg.Error{Code: 400, Message: "Message has protected content and can't be forwarded"}, sentinel: tg.ErrProtectedContent}
}

func errIgnorable() error {
	return &tg.Error{Code: 406, Message: "CHANNEL_TOO_LARGE"}
}

func errMessageNotFound() error {
	return &simError{tdErr: &tg.Error{Code: 404, Message: "Not Found"}, sentinel: tg.ErrMessageNotFound}
}

// errChannelPrivate is what Telegram answers once an account has lost access
// to a channel; it will not heal by retrying, hence PermanentError. Like the
// TDLib adapter's, it matches tg.ErrNoAccess and tg.ErrChatNotFound.
func errChannelPrivate() error {
	return tg.Permanent(&simError{tdErr: &tg.Error{Code: 400, Message: "CHANNEL_PRIVATE"},
		sentinel: errors.Join(tg.ErrNoAccess, tg.ErrChatNotFound)})
}

// errUserBanned is the server's refusal of a send by a member banned from
// the chat; like CHANNEL_PRIVATE it matches tg.ErrNoAccess and
// tg.ErrChatNotFound, as the TDLib adapter's does.
func errUserBanned() error {
	return tg.Permanent(&simError{tdErr: &tg.Error{Code: 400, Message: "USER_BANNED_IN_CHANNEL"},
		sentinel: errors.Join(tg.ErrNoAccess, tg.ErrChatNotFound)})
}

func errBadRequest(format string, args ...any) error {
	return &tg.Error{Code: 400, Message: fmt.Sprintf(format, args...)}
}

// errSendFailed is the reason carried by an injected updateMessageSendFailed:
// a server-side failure that a later attempt may not meet.
func errSendFailed() error {
	return &tg.Error{Code: 500, Message: "RPC_CALL_FAIL"}
}

func errFloodWait(d time.Duration) error {
	secs := int64((d + time.Second - 1) / time.Second)
	return &tg.FloodWaitError{
		RetryAfter: d,
		Err:        &tg.Error{Code: 429, Message: fmt.Sprintf("Too Many Requests: retry after %d", secs)},
	}
}
