package tdlib

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"stashd/tg"
)

// mapError turns a TDLib error into the port's typed errors, so that
// tg.Classify tells the caller how to recover:
//
//   - 429 with a wait becomes *tg.FloodWaitError;
//   - 406 stays a *tg.Error, which Classify calls ignored (TDLib asks
//     clients to drop these silently);
//   - 400 "Chat not found" means this client does not know the chat:
//     permanent, errors.Is tg.ErrChatNotFound;
//   - 400 "Can't access the chat" (what a server call answers for a chat
//     the account lost, while getChat still succeeds locally),
//     CHANNEL_PRIVATE and USER_BANNED_IN_CHANNEL mean the account lost the
//     chat: permanent, errors.Is tg.ErrNoAccess (and tg.ErrChatNotFound);
//     CHAT_ADMIN_REQUIRED is permanent for the request;
//   - 404, and 400 "Message not found", wrap tg.ErrMessageNotFound;
//   - everything else stays a *tg.Error (500 "Request aborted" on teardown
//     is retryable, other 4xx permanent).
//
// The *tg.Error is always in the chain, for logs and for errors.As.
func mapError(code int, message string) error {
	te := &tg.Error{Code: code, Message: message}
	switch {
	case code == 429:
		if d, ok := retryAfter(message); ok {
			return &tg.FloodWaitError{RetryAfter: d, Err: te}
		}
		return te
	case code == 404 || code == 400 && message == "Message not found":
		return fmt.Errorf("%w: %w", tg.ErrMessageNotFound, te)
	case code == 400:
		switch message {
		case "Chat not found":
			return tg.Permanent(fmt.Errorf("%w: %w", tg.ErrChatNotFound, te))
		case "Can't access the chat", "CHANNEL_PRIVATE", "USER_BANNED_IN_CHANNEL":
			return tg.Permanent(fmt.Errorf("%w: %w: %w", tg.ErrNoAccess, tg.ErrChatNotFound, te))
		case "Message has protected content and can't be forwarded", "CHAT_FORWARDS_RESTRICTED":
			return tg.Permanent(fmt.Errorf("%w: %w", tg.ErrProtectedContent, te))
		case "CHAT_ADMIN_REQUIRED":
			return tg.Permanent(te)
		}
	}
	return te
}

// retryAfter finds the wait in TDLib's 429 message ("Too Many Requests:
// retry after 17") or in the raw server error that some paths pass through
// ("FLOOD_WAIT_17").
func retryAfter(message string) (time.Duration, bool) {
	for _, marker := range []string{"retry after ", "FLOOD_WAIT_"} {
		i := strings.Index(message, marker)
		if i < 0 {
			continue
		}
		digits := message[i+len(marker):]
		end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' })
		if end >= 0 {
			digits = digits[:end]
		}
		if n, err := strconv.Atoi(digits); err == nil {
			return time.Duration(n) * time.Second, true
		}
	}
	return 0, false
}

// tdError is TDLib's error object.
type tdError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// decodeError maps a TDLib error object ({"@type":"error",...}).
func decodeError(data []byte) error {
	var e tdError
	if err := json.Unmarshal(data, &e); err != nil {
		return fmt.Errorf("decode error: %w", err)
	}
	return mapError(e.Code, e.Message)
}
