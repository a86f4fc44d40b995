package tdlib

import (
	"errors"
	"testing"
	"time"

	"stashd/tg"
)

func TestDecodeError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture      string
		class        tg.Class
		chatNotFound bool
		noAccess     bool
		msgNotFound  bool
		floodWait    time.Duration
	}{
		{fixture: "error_429.json", class: tg.ClassFloodWait, floodWait: 17 * time.Second},
		{fixture: "error_400_channel_private.json", class: tg.ClassPermanent, chatNotFound: true, noAccess: true},
		// What server calls answer for a chat the account lost while
		// getChat still succeeds locally.
		{fixture: "error_400_cant_access.json", class: tg.ClassPermanent, chatNotFound: true, noAccess: true},
		{fixture: "error_400_chat_not_found.json", class: tg.ClassPermanent, chatNotFound: true},
		{fixture: "error_406.json", class: tg.ClassIgnored},
		// deleteMessages of a message the account may not delete.
		{fixture: "error_400_message_cant_be_deleted.json", class: tg.ClassPermanent},
		{fixture: "error_404.json", class: tg.ClassPermanent, msgNotFound: true},
		{fixture: "error_500_request_aborted.json", class: tg.ClassRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			err := decodeError(fixture(t, tt.fixture))
			if err == nil {
				t.Fatal("no error")
			}
			if c := tg.Classify(err); c != tt.class {
				t.Errorf("%v: class %q, want %q", err, c, tt.class)
			}
			if got := errors.Is(err, tg.ErrChatNotFound); got != tt.chatNotFound {
				t.Errorf("%v: errors.Is(ErrChatNotFound) = %v", err, got)
			}
			if got := errors.Is(err, tg.ErrNoAccess); got != tt.noAccess {
				t.Errorf("%v: errors.Is(ErrNoAccess) = %v", err, got)
			}
			if got := errors.Is(err, tg.ErrMessageNotFound); got != tt.msgNotFound {
				t.Errorf("%v: errors.Is(ErrMessageNotFound) = %v", err, got)
			}
			d, ok := tg.FloodWait(err)
			if ok != (tt.floodWait != 0) || d != tt.floodWait {
				t.Errorf("%v: FloodWait = %s, %v; want %s", err, d, ok, tt.floodWait)
			}
			// The TDLib error itself stays in the chain for logs.
			var te *tg.Error
			if !errors.As(err, &te) || te.Code == 0 || te.Message == "" {
				t.Errorf("%v: no *tg.Error in the chain", err)
			}
		})
	}
}

func TestMapError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code      int
		message   string
		class     tg.Class
		floodWait time.Duration
	}{
		{429, "Too Many Requests: retry after 3600", tg.ClassFloodWait, time.Hour},
		{420, "FLOOD_WAIT_5", tg.ClassRetryable, 0},
		{429, "FLOOD_WAIT_5", tg.ClassFloodWait, 5 * time.Second},
		// A 429 without a wait cannot be honoured as one; the retry loop
		// backs off instead.
		{429, "Too Many Requests", tg.ClassRetryable, 0},
		{400, "CHAT_ADMIN_REQUIRED", tg.ClassPermanent, 0},
		{400, "USER_BANNED_IN_CHANNEL", tg.ClassPermanent, 0},
		{400, "Message not found", tg.ClassPermanent, 0},
		{401, "Unauthorized", tg.ClassRetryable, 0},
		{500, "Request aborted", tg.ClassRetryable, 0},
	}
	for _, tt := range tests {
		err := mapError(tt.code, tt.message)
		if c := tg.Classify(err); c != tt.class {
			t.Errorf("%d %q: class %q, want %q", tt.code, tt.message, c, tt.class)
		}
		if d, _ := tg.FloodWait(err); d != tt.floodWait {
			t.Errorf("%d %q: wait %s, want %s", tt.code, tt.message, d, tt.floodWait)
		}
	}
	if !errors.Is(mapError(400, "USER_BANNED_IN_CHANNEL"), tg.ErrChatNotFound) {
		t.Error("USER_BANNED_IN_CHANNEL does not say the chat is out of reach")
	}
	if errors.Is(mapError(400, "CHAT_ADMIN_REQUIRED"), tg.ErrChatNotFound) {
		t.Error("CHAT_ADMIN_REQUIRED says the chat is out of reach; it only lacks rights")
	}
	if err := decodeError([]byte(`{"@type":"error","code":"x"}`)); tg.Classify(err) != tg.ClassRetryable {
		t.Errorf("undecodable error: %v", err)
	}
}
