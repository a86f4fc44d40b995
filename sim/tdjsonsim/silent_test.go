package tdjsonsim_test

import (
	"strings"
	"testing"

	"stashd/sim/tgsim"
)

// sendDocument sends the document of a fresh post in w.channel to w.dest
// with options and caption, and returns the answer.
func sendDocument(t *testing.T, c *wire, w *world, options any, caption string) tdObject {
	t.Helper()
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "s.tar", Data: []byte("0123456789")})
	msg := c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	remote := msg.str("content", "document", "document", "remote", "id")
	res, _ := c.call(1, "sendMessage", map[string]any{
		"chat_id": w.dest, "message_thread_id": 0, "reply_to": nil, "options": options, "reply_markup": nil,
		"input_message_content": map[string]any{
			"@type":    "inputMessageDocument",
			"document": map[string]any{"@type": "inputFileRemote", "id": remote},
			"caption":  map[string]any{"@type": "formattedText", "text": caption, "entities": []any{}},
		},
	})
	return res
}

func TestSendOptionsDisableNotificationRecorded(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 6})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")

	silent := map[string]any{"@type": "messageSendOptions", "disable_notification": true, "from_background": false,
		"protect_content": false, "update_order_of_installed_sticker_sets": false, "scheduling_state": nil,
		"effect_id": "0", "sending_id": 0, "only_preview": false}
	if res := sendDocument(t, c, w, silent, "quiet"); res.typ() != "message" {
		t.Fatalf("silent sendMessage: %v", res)
	}
	if res := sendDocument(t, c, w, nil, "loud"); res.typ() != "message" {
		t.Fatalf("sendMessage without options: %v", res)
	}
	got := map[string]bool{}
	for _, s := range w.Sends() {
		got[s.Caption] = s.Silent
	}
	if !got["quiet"] || got["loud"] {
		t.Errorf("recorded silent flags %v, want quiet silent and loud not", got)
	}
}

func TestCaptionOverLimitRefusedAsTDLib(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 6})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	res := sendDocument(t, c, w, nil, strings.Repeat("é", tgsim.CaptionLimit+1))
	if res.typ() != "error" || res.int("code") != 400 || res.str("message") != "Message caption is too long" {
		t.Errorf("sendMessage with a caption over the limit: %v", res)
	}
	if res := sendDocument(t, c, w, nil, strings.Repeat("é", tgsim.CaptionLimit)); res.typ() != "message" {
		t.Errorf("sendMessage with a caption at the limit: %v", res)
	}
}
