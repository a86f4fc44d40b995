package tg

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Error is a failed Telegram request as TDLib reports it: a code and a
// message such as 400 "CHANNEL_PRIVATE" or 429 "Too Many Requests: retry
// after 30".
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("telegram %d: %s", e.Code, e.Message) }

// Class tells a caller how to recover from an error.
type Class string

// Error classes.
const (
	// ClassRetryable errors may succeed later without any change: network
	// trouble, 500s, timeouts.
	ClassRetryable Class = "retryable"
	// ClassPermanent errors will not succeed for this request: the chat is
	// private, the message is gone, the input is invalid.
	ClassPermanent Class = "permanent"
	// ClassFloodWait means the account must wait before its next request.
	ClassFloodWait Class = "flood_wait"
	// ClassIgnored are errors TDLib asks clients to handle silently (406).
	ClassIgnored Class = "ignored"
)

// FloodWaitError is a 429 with the wait Telegram asked for.
type FloodWaitError struct {
	RetryAfter time.Duration
	Err        error
}

func (e *FloodWaitError) Error() string {
	return fmt.Sprintf("flood wait %s: %v", e.RetryAfter, e.Err)
}
func (e *FloodWaitError) Unwrap() error { return e.Err }

// PermanentError marks a failure that retrying will not fix.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a PermanentError.
func Permanent(err error) error { return &PermanentError{Err: err} }

// Sentinel errors the port's implementations return (wrapped in *Error or
// PermanentError where Telegram gives a code).
var (
	// ErrChatNotFound: the chat is unknown to this client (not loaded, or no
	// access). Before loadChats TDLib answers this for every chat.
	ErrChatNotFound = errors.New("chat not found")
	// ErrNoAccess: the account lost access to the chat (400 "Can't access
	// the chat", CHANNEL_PRIVATE, banned). TDLib still answers getChat and
	// openChat from its local state; server calls fail. Permanent for the
	// source until access returns.
	ErrNoAccess = errors.New("no access to the chat")
	// ErrProtectedContent: the message's chat protects its content
	// (has_protected_content, can_be_saved false): its document cannot be
	// re-sent. Permanent.
	ErrProtectedContent = errors.New("message has protected content and can't be forwarded")
	// ErrMessageNotFound: the message does not exist or was deleted.
	ErrMessageNotFound = errors.New("message not found")
	// ErrClosed: the client has been closed.
	ErrClosed = errors.New("telegram client closed")
	// ErrSendVanished: TDLib deleted a pending send (updateDeleteMessages
	// for its temporary id) instead of reporting success or failure; the
	// message does not exist and may be sent again.
	ErrSendVanished = errors.New("pending send was deleted before it was sent")
	// ErrSendRefused: Telegram refused a send (updateMessageSendFailed,
	// or an error answer to sendMessage itself): the message does not exist.
	// The refusal itself is wrapped beside it.
	ErrSendRefused = errors.New("send refused")
	// ErrSendTimeout: no outcome arrived for a send within its deadline. The
	// message may still appear: reconcile by token before sending again.
	ErrSendTimeout = errors.New("no outcome for the send within its deadline")
	// ErrRequestTimeout: TDLib did not answer a request within the
	// adapter's deadline (kept below go-tdlib's own 60 s timeout).
	ErrRequestTimeout = errors.New("no answer from TDLib within the request deadline")
	// ErrLeaseLost: the account's lease is lost (its local deadline passed
	// without a renewal, or another instance took it); no request may be
	// made for it any more. Retryable: the instance that holds the lease
	// now retries what failed.
	ErrLeaseLost = errors.New("account lease lost")
	// ErrNoTDLib: this binary was built without TDLib.
	ErrNoTDLib = errors.New("stashd was built without TDLib (build with -tags libtdjson, see docs/troubleshooting.md)")
)

// Classify returns the recovery class of err. Unknown errors are retryable:
// the retry loop and its attempt cap decide when to give up.
func Classify(err error) Class {
	var fw *FloodWaitError
	var pe *PermanentError
	var te *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &fw):
		return ClassFloodWait
	case errors.As(err, &pe), errors.Is(err, ErrChatNotFound), errors.Is(err, ErrMessageNotFound), errors.Is(err, ErrNoAccess),
		errors.Is(err, ErrProtectedContent):
		return ClassPermanent
	case errors.As(err, &te):
		switch {
		case te.Code == 406:
			return ClassIgnored
		case NotSent(err):
			return ClassRetryable
		case te.Code == 400 || te.Code == 403 || te.Code == 404:
			return ClassPermanent
		}
	}
	return ClassRetryable
}

// MayPass reports whether a request's failure may not meet a later try,
// or another session: a retryable one (a 500, the lease gate, a stop) or a
// flood wait.
func MayPass(err error) bool {
	c := Classify(err)
	return c == ClassRetryable || c == ClassFloodWait
}

// FloodWait returns the wait a flood-wait error asks for, and whether err is one.
func FloodWait(err error) (time.Duration, bool) {
	var fw *FloodWaitError
	if errors.As(err, &fw) {
		return fw.RetryAfter, true
	}
	return 0, false
}

// NotSent reports whether err is TDLib's failure of an album's message
// that the server's answer to the album left out (400 "Message was not
// sent", SendMultiMediaQuery): nothing was refused, and sent again the
// message lands, so it is retryable, not a 400 like the others.
func NotSent(err error) bool {
	var te *Error
	return errors.As(err, &te) && te.Code == 400 && te.Message == "Message was not sent"
}

// NoWriteAccess reports whether err is TDLib's refusal to send a document
// into a chat the account may not post in: another account may still
// deliver there, and the rights may come back. TDLib refuses from the
// rights it knows: 400 "Have no write access to the chat" (no member),
// "Need administrator rights in the channel chat" (a channel's member
// without the right to post), "Not enough rights to send documents to the
// chat" (a group member restricted from documents). When its rights lag
// the server's, the server refuses instead, and TDLib passes the refusal
// on in updateMessageSendFailed with the server's message: 403 made 400,
// CHAT_WRITE_FORBIDDEN (a channel) or CHAT_SEND_DOCS_FORBIDDEN (a group).
// An account removed from the chat meets the same two judges: TDLib, once
// it knows, refuses with "Have no write access to the chat"; before, the
// server refuses the send with CHANNEL_PRIVATE (or USER_BANNED_IN_CHANNEL),
// and TDLib takes the account as having left. Reads of the chat answer
// "Can't access the chat" meanwhile. Each is a refusal of the chat's
// posts, which access regained lifts, not a loss of the package: it counts
// here, and the delivery waits or goes through another account.
func NoWriteAccess(err error) bool {
	var te *Error
	if !errors.As(err, &te) || te.Code != 400 && te.Code != 403 {
		return false
	}
	for _, m := range noWriteMessages {
		if strings.Contains(te.Message, m) {
			return true
		}
	}
	return false
}

var noWriteMessages = []string{"Have no write access", "Need administrator rights in the channel chat",
	"Not enough rights to send documents", "CHAT_WRITE_FORBIDDEN", "CHAT_SEND_DOCS_FORBIDDEN",
	"CHANNEL_PRIVATE", "USER_BANNED_IN_CHANNEL", "Can't access the chat"}

// ErrChatFloodWait: sends to a chat are paused because Telegram refused
// one there with 429 (its per-chat limit); it comes inside a
// FloodWaitError with the rest of the wait.
var ErrChatFloodWait = errors.New("sends to the chat are paused by a flood wait")

// ErrSendsPaused: the account's sends are paused because Telegram
// answered one of its requests with 429 (Paced); it comes wrapped in a
// FloodWaitError with the rest of the wait.
var ErrSendsPaused = errors.New("the account's sends are paused by a flood wait")

// ErrTopicClosed: a send into a closed forum topic was refused (400
// TOPIC_CLOSED) and the account could not reopen it. Not permanent: the
// topic may be reopened, and the delivery then resumes.
var ErrTopicClosed = errors.New("destination forum topic is closed")

// ErrTopicDeleted: a send into a destination forum topic that stashd
// creates by name was refused (400 TOPIC_DELETED) even after the topic was
// created again: someone deleted it once more. Not permanent: the next
// attempt creates it again.
var ErrTopicDeleted = errors.New("destination forum topic was deleted again")

// ErrNoWriteAccess: no account of the daemon may post in a destination
// (each was refused for want of rights: NoWriteAccess). Not permanent:
// rights come back, and the deliveries there wait for them.
var ErrNoWriteAccess = errors.New("no account may post in the destination")

// TopicClosed reports whether err is Telegram's refusal to post into a
// closed forum topic (400 TOPIC_CLOSED).
func TopicClosed(err error) bool {
	var te *Error
	return errors.As(err, &te) && te.Code == 400 && te.Message == "TOPIC_CLOSED"
}

// TopicDeleted reports whether err says the forum topic a send went to no
// longer exists: 400 TOPIC_DELETED from the server, or TDLib's own 400
// "Invalid message thread ID specified" once it has forgotten the topic.
func TopicDeleted(err error) bool {
	var te *Error
	return errors.As(err, &te) && te.Code == 400 &&
		(te.Message == "TOPIC_DELETED" || te.Message == "Invalid message thread ID specified")
}
