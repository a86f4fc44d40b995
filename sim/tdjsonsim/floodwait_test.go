package tdjsonsim_test

import (
	"path/filepath"
	"testing"

	"stashd/sim/tgsim"
)

// A send an instance left pending is re-sent by TDLib itself when the next
// instance on its directory logs in, before any request of the client's:
// inside the wait a 429 refusing a send to that chat asked for, the re-send
// is refused again (updateMessageSendFailed with 429 "retry after N", as
// TDLib writes it) and the world notes it as a request inside the wait.
func TestResendInsideAChatFloodWaitOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 14, ResendAfterRestart: true})
	w.LimitChatSends(w.dest, 1.0/600, 1) // one send, then ten minutes
	_, path := startServer(t, w.World)
	dir := filepath.Join(w.dir, "instance1")
	first := dialWire(t, path)
	first.login(1, dir, "acct1")
	first.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "d.zip", Data: []byte("PK")})
	m := first.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	send := map[string]any{
		"chat_id": w.dest,
		"input_message_content": map[string]any{
			"@type":    "inputMessageDocument",
			"document": map[string]any{"@type": "inputFileRemote", "id": m.str("content", "document", "document", "remote", "id")},
		},
	}
	w.HoldSends(true)
	first.ok(1, "sendMessage", send, "message") // pending at the close
	w.HoldSends(false)
	first.ok(1, "sendMessage", send, "message")
	refused, _ := first.until("the chat's 429", func(o tdObject) bool { return o.typ() == "updateMessageSendFailed" })
	if refused.int("error", "code") != 429 {
		t.Fatalf("second send: %v; want the chat's 429", refused)
	}
	first.ok(1, "close", nil, "ok")
	first.until("authorizationStateClosed", func(o tdObject) bool {
		return o.typ() == "updateAuthorizationState" && o.str("authorization_state", "@type") == "authorizationStateClosed"
	})
	if b := w.FloodWaitBreaches("acct1"); len(b) != 0 {
		t.Fatalf("breaches before the restart: %+v", b)
	}

	again := dialWire(t, path)
	again.login(1, dir, "acct1")
	failed, _ := again.until("the re-sent outcome", func(o tdObject) bool {
		return o.typ() == "updateMessageSendFailed" || o.typ() == "updateMessageSendSucceeded"
	})
	if failed.typ() != "updateMessageSendFailed" || failed.int("error", "code") != 429 ||
		failed.str("message", "sending_state", "@type") != "messageSendingStateFailed" {
		t.Errorf("re-sent outcome %v; want it refused with 429", failed)
	}
	b := w.FloodWaitBreaches("acct1")
	if len(b) != 1 || !b[0].Resend || b[0].Chat != w.dest {
		t.Errorf("breaches = %+v; want TDLib's re-send to the destination", b)
	}
}
