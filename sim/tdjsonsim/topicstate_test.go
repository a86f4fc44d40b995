package tdjsonsim_test

import (
	"strings"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// On the wire, as TDLib writes it: createForumTopic answers with the name
// cleaned; a send into a closed topic fails with 400 TOPIC_CLOSED in
// updateMessageSendFailed, whose message has a new local id and stays
// until deleteMessages; toggleForumTopicIsClosed reopens a topic the
// account created (and is refused for another's); a send into a deleted
// topic fails with 400 TOPIC_DELETED.
func TestTopicStatesOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 23})
	c, m := wireWithDocument(t, w)
	icon := map[string]any{"@type": "forumTopicIcon", "color": 0x6FB9F0, "custom_emoji_id": "0"}
	raw := "  Dragons   of\u2003the North " + strings.Repeat("é", 130)
	info := c.ok(1, "createForumTopic", map[string]any{"chat_id": w.forum, "name": raw, "icon": icon}, "forumTopicInfo")
	thread := info.int("message_thread_id")
	if want := tg.CleanTopicName(raw); info.str("name") != want || w.Topics(w.forum)[thread] != want {
		t.Errorf("createForumTopic named the topic %q (world: %q), want %q", info.str("name"), w.Topics(w.forum)[thread], want)
	}

	send := func(thread int64) tdObject { return sendOutcome(c, w.forum, thread, m) }

	w.CloseTopic(w.forum, thread, true)
	failed := send(thread)
	if failed.typ() != "updateMessageSendFailed" || failed.int("error", "code") != 400 || failed.str("error", "message") != "TOPIC_CLOSED" {
		t.Fatalf("send into a closed topic: %v", failed)
	}
	local := failed.int("message", "id")
	if local == failed.int("old_message_id") || tg.MessageID(local).IsServer() {
		t.Errorf("the failed message has id %d (temporary %d), want a new local id", local, failed.int("old_message_id"))
	}
	if got := w.FailedMessages("acct1"); got != 1 {
		t.Errorf("%d failed local messages kept, want 1", got)
	}
	c.ok(1, "deleteMessages", map[string]any{"chat_id": w.forum, "message_ids": []int64{local}, "revoke": true}, "ok")
	if got := w.FailedMessages("acct1"); got != 0 {
		t.Errorf("%d failed local messages kept after deleteMessages, want 0", got)
	}

	if res := c.ok(1, "toggleForumTopicIsClosed", map[string]any{"chat_id": w.forum, "message_thread_id": w.topic, "is_closed": true}, "error"); res.int("code") != 400 || res.str("message") != "Not enough rights to close or open the topic" {
		t.Errorf("closing another's topic: %v", res)
	}
	c.ok(1, "toggleForumTopicIsClosed", map[string]any{"chat_id": w.forum, "message_thread_id": thread, "is_closed": false}, "ok")
	if w.TopicClosed(w.forum, thread) {
		t.Error("the topic is still closed after toggleForumTopicIsClosed")
	}
	if ok := send(thread); ok.typ() != "updateMessageSendSucceeded" {
		t.Errorf("send into the reopened topic: %v", ok)
	}

	w.DeleteTopic(w.forum, thread)
	if gone := send(thread); gone.typ() != "updateMessageSendFailed" || gone.int("error", "code") != 400 || gone.str("error", "message") != "TOPIC_DELETED" {
		t.Errorf("send into a deleted topic: %v", gone)
	}
}

// A chat's send limit refuses a send beyond it in updateMessageSendFailed
// with 429 "Too Many Requests: retry after N" when the wait is longer than
// TDLib sits out, as TDLib reports the server's FLOOD_WAIT then; a send to
// another chat goes through.
func TestChatSendLimitOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 29})
	w.LimitChatSends(w.dest, 1.0/600, 1) // one send, then ten minutes
	c, m := wireWithDocument(t, w)
	send := func(chat tg.ChatID) tdObject { return sendOutcome(c, chat, 0, m) }
	if first := send(w.dest); first.typ() != "updateMessageSendSucceeded" {
		t.Fatalf("first send: %v", first)
	}
	flood := send(w.dest)
	if flood.typ() != "updateMessageSendFailed" || flood.int("error", "code") != 429 ||
		!strings.HasPrefix(flood.str("error", "message"), "Too Many Requests: retry after ") {
		t.Errorf("send past the chat's limit: %v", flood)
	}
	if other := send(w.channel); other.typ() != "updateMessageSendSucceeded" {
		t.Errorf("send to another chat: %v", other)
	}
}

// A wait TDLib sits out reaches the wire as a late outcome only: the
// message stays pending through the chat's wait and then lands, with no
// 429.
func TestChatSendWaitSatOutOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 29})
	w.LimitChatSends(w.dest, 0.5, 1) // one send, then two seconds
	c, m := wireWithDocument(t, w)
	if first := sendOutcome(c, w.dest, 0, m); first.typ() != "updateMessageSendSucceeded" {
		t.Fatalf("first send: %v", first)
	}
	start := time.Now()
	if late := sendOutcome(c, w.dest, 0, m); late.typ() != "updateMessageSendSucceeded" {
		t.Errorf("send inside the chat's wait: %v; want it landed once TDLib sat the wait out", late)
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("the send landed after %s; want after the chat's wait", took)
	}
	if n := w.FloodWaitsSatOut("acct1"); n != 1 {
		t.Errorf("FloodWaitsSatOut = %d, want 1", n)
	}
}

// Rights on the wire: while the account's TDLib still holds posting rights
// the server revoked, sendMessage answers with the temporary message and
// the server's refusal follows in updateMessageSendFailed (400
// CHAT_WRITE_FORBIDDEN, as TDLib passes the server's 403 on); once TDLib
// knows, sendMessage itself answers 400 "Need administrator rights in the
// channel chat".
func TestLaggingRightsOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 31})
	c, m := wireWithDocument(t, w)
	w.SetServerWriteAccess("acct1", w.dest, false)
	if failed := sendOutcome(c, w.dest, 0, m); failed.typ() != "updateMessageSendFailed" || failed.int("error", "code") != 400 ||
		failed.str("error", "message") != "CHAT_WRITE_FORBIDDEN" {
		t.Errorf("send the server refuses: %v", failed)
	}
	w.SetWriteAccess("acct1", w.dest, false)
	if res := sendDoc(c, w.dest, 0, m, "error"); res.int("code") != 400 || res.str("message") != "Need administrator rights in the channel chat" {
		t.Errorf("send TDLib refuses: %v", res)
	}
}

// wireWithDocument serves w, logs acct1 in over the wire, loads its chats
// and posts a document in w.channel; it returns the client and the
// message as the client read it.
func wireWithDocument(t *testing.T, w *world) (*wire, tdObject) {
	t.Helper()
	c := readyWire(t, w)
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "d.zip", Data: []byte("PK")})
	return c, c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
}

// sendDoc sends m's document into thread of chat over c, captioned
// "d", and returns the answer, of type answer ("message", or "error").
func sendDoc(c *wire, chat tg.ChatID, thread int64, m tdObject, answer string) tdObject {
	return c.ok(1, "sendMessage", map[string]any{
		"chat_id": chat, "message_thread_id": thread, "reply_to": nil, "options": nil, "reply_markup": nil,
		"input_message_content": map[string]any{
			"@type":    "inputMessageDocument",
			"document": map[string]any{"@type": "inputFileRemote", "id": m.str("content", "document", "document", "remote", "id")},
			"caption":  map[string]any{"@type": "formattedText", "text": "d", "entities": []any{}},
		},
	}, answer)
}

// sendOutcome sends m's document into thread of chat over c and returns
// the update that settles the send (updateMessageSendSucceeded or Failed).
func sendOutcome(c *wire, chat tg.ChatID, thread int64, m tdObject) tdObject {
	tmp := sendDoc(c, chat, thread, m, "message")
	out, _ := c.until("send outcome", func(o tdObject) bool {
		return (o.typ() == "updateMessageSendFailed" || o.typ() == "updateMessageSendSucceeded") && o.int("old_message_id") == tmp.int("id")
	})
	return out
}
