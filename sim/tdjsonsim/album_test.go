package tdjsonsim_test

import (
	"fmt"
	"testing"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// albumContents posts n documents in w.channel and returns them as
// sendMessageAlbum's input_message_contents, captioned "album i".
func albumContents(t *testing.T, c *wire, w *world, n int) []any {
	t.Helper()
	out := make([]any, n)
	for i := range out {
		posted := w.Post(w.channel, 0, tgsim.Post{FileName: fmt.Sprintf("v.part%d.rar", i+1), Data: fmt.Appendf(nil, "Rar!%d", i)})
		msg := c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
		out[i] = map[string]any{
			"@type":    "inputMessageDocument",
			"document": map[string]any{"@type": "inputFileRemote", "id": msg.str("content", "document", "document", "remote", "id")},
			"caption":  map[string]any{"@type": "formattedText", "text": fmt.Sprintf("album %d", i), "entities": []any{}},
		}
	}
	return out
}

// sendMessageAlbum answers messages, each pending with one media_album_id,
// and each message's outcome follows in its own update; one bad content
// refuses the whole request as TDLib does, sending nothing.
func TestSendMessageAlbumOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 8})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	contents := albumContents(t, c, w, 3)

	res := c.ok(1, "sendMessageAlbum", map[string]any{
		"chat_id": w.dest, "message_thread_id": 0, "reply_to": nil, "options": nil, "input_message_contents": contents,
	}, "messages")
	msgs, _ := res.get("messages").([]any)
	if len(msgs) != 3 || res.int("total_count") != 3 {
		t.Fatalf("sendMessageAlbum answer: %v", res)
	}
	temps := map[int64]bool{}
	var album string
	for i, raw := range msgs {
		m := tdObject(raw.(map[string]any))
		if tg.MessageID(m.int("id")).IsServer() || m.str("sending_state", "@type") != "messageSendingStatePending" ||
			m.str("content", "caption", "text") != fmt.Sprintf("album %d", i) || m.str("media_album_id") == "0" {
			t.Errorf("album message %d: %v", i, m)
		}
		if i == 0 {
			album = m.str("media_album_id")
		} else if m.str("media_album_id") != album {
			t.Errorf("album message %d in album %s, want %s", i, m.str("media_album_id"), album)
		}
		temps[m.int("id")] = true
	}
	for range 3 {
		sent, _ := c.until("send outcome", func(o tdObject) bool { return o.typ() == "updateMessageSendSucceeded" })
		if !temps[sent.int("old_message_id")] || sent.str("message", "media_album_id") != album {
			t.Errorf("updateMessageSendSucceeded: %v", sent)
		}
		delete(temps, sent.int("old_message_id"))
	}

	bad := append(contents[:1:1], map[string]any{
		"@type":    "inputMessageDocument",
		"document": map[string]any{"@type": "inputFileRemote", "id": "not a remote id"},
		"caption":  map[string]any{"@type": "formattedText", "text": "x", "entities": []any{}},
	})
	refused, _ := c.call(1, "sendMessageAlbum", map[string]any{
		"chat_id": w.dest, "message_thread_id": 0, "reply_to": nil, "options": nil, "input_message_contents": bad,
	})
	if refused.typ() != "error" || refused.int("code") != 400 {
		t.Errorf("album with a bad remote id: %v, want 400", refused)
	}
	if n := len(w.Sends()); n != 3 {
		t.Errorf("%d messages sent, want the first album's 3", n)
	}
}
