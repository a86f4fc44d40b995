package tg

import (
	"fmt"
	"testing"
	"time"
)

// NoWriteAccess knows TDLib's refusals of a document send for want of
// rights or of membership, and only those.
func TestNoWriteAccess(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&Error{Code: 400, Message: "Have no write access to the chat"}, true},
		{&Error{Code: 400, Message: "Need administrator rights in the channel chat"}, true},
		{&Error{Code: 400, Message: "Not enough rights to send documents to the chat"}, true},
		{&Error{Code: 403, Message: "CHAT_WRITE_FORBIDDEN"}, true},
		{fmt.Errorf("send: %w: %w", ErrSendRefused, &Error{Code: 400, Message: "CHAT_WRITE_FORBIDDEN"}), true},
		{fmt.Errorf("send: %w: %w", ErrSendRefused, &Error{Code: 400, Message: "CHAT_SEND_DOCS_FORBIDDEN"}), true},
		// The account was removed from the chat.
		{fmt.Errorf("send: %w: %w", ErrSendRefused, Permanent(&Error{Code: 400, Message: "CHANNEL_PRIVATE"})), true},
		{Permanent(fmt.Errorf("%w: %w", ErrNoAccess, &Error{Code: 400, Message: "Can't access the chat"})), true},
		{&Error{Code: 400, Message: "USER_BANNED_IN_CHANNEL"}, true},
		{&Error{Code: 400, Message: "FILE_REFERENCE_INVALID"}, false},
		{&Error{Code: 400, Message: "Chat not found"}, false},
		{&Error{Code: 400, Message: "TOPIC_CLOSED"}, false},
		{&Error{Code: 400, Message: "Not enough rights to create a topic"}, false},
		{&Error{Code: 500, Message: "Have no write access to the chat"}, false},
		{ErrNoWriteAccess, false},
	} {
		if got := NoWriteAccess(c.err); got != c.want {
			t.Errorf("NoWriteAccess(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A failure may pass for a later try when it is retryable or a flood
// wait; one Telegram says will not pass, or asks to be ignored, does not.
func TestMayPass(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&Error{Code: 500, Message: "INTERNAL"}, true},
		{&FloodWaitError{RetryAfter: 3 * time.Second}, true},
		{ErrLeaseLost, true},
		{&Error{Code: 400, Message: "Message can't be deleted"}, false},
		{&Error{Code: 403, Message: "CHANNEL_PRIVATE"}, false},
		{&Error{Code: 406, Message: "CHANNEL_TOO_LARGE"}, false},
		{ErrMessageNotFound, false},
	} {
		if got := MayPass(tc.err); got != tc.want {
			t.Errorf("MayPass(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
