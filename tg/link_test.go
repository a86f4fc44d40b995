package tg_test

import (
	"testing"

	"stashd/tg"
)

func TestMessageLink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		chat  tg.ChatID
		msg   tg.MessageID
		topic int64
		want  string
	}{
		{-1001234567890, tg.MessageIDFromServer(42), 0, "https://t.me/c/1234567890/42"},
		{-1001234567890, tg.MessageIDFromServer(42), int64(tg.MessageIDFromServer(7)), "https://t.me/c/1234567890/7/42"},
		{-1001234567890, 42, 0, ""},                  // not on the server
		{123456, tg.MessageIDFromServer(42), 0, ""},  // a private chat
		{-987654, tg.MessageIDFromServer(42), 0, ""}, // a basic group
	} {
		if got := tg.MessageLink(tc.chat, tc.msg, tc.topic); got != tc.want {
			t.Errorf("MessageLink(%d, %d, %d) = %q, want %q", tc.chat, tc.msg, tc.topic, got, tc.want)
		}
	}
}
