package tdjsonsim_test

import (
	"slices"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// historyPage reads chat's history from the end over c.
func historyPage(t *testing.T, c *wire, chat int64) []tdObject {
	t.Helper()
	page := c.ok(1, "getChatHistory", map[string]any{"chat_id": chat, "from_message_id": 0, "offset": 0, "limit": 100, "only_local": false}, "messages")
	raw, _ := page.get("messages").([]any)
	out := make([]tdObject, len(raw))
	for i, m := range raw {
		out[i] = tdObject(m.(map[string]any))
	}
	return out
}

// A message being sent is in the session's history, first from the end,
// as TDLib keeps it in the chat: outgoing, with sending_state pending; it
// is the chat's last message and getMessage finds it.
func TestPendingSendInHistoryOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 29, SendLatency: time.Hour})
	c, m := wireWithDocument(t, w)
	tmp := sendDoc(c, w.dest, 0, m, "message")
	page := historyPage(t, c, int64(w.dest))
	if len(page) != 1 || page[0].int("id") != tmp.int("id") || page[0].get("is_outgoing") != true ||
		page[0].str("sending_state", "@type") != "messageSendingStatePending" {
		t.Fatalf("history = %v; want the pending message %d", page, tmp.int("id"))
	}
	if got := c.ok(1, "getMessage", map[string]any{"chat_id": w.dest, "message_id": tmp.int("id")}, "message"); got.str("sending_state", "@type") != "messageSendingStatePending" {
		t.Errorf("getMessage of the pending message = %v", got)
	}
	got := c.ok(1, "getChat", map[string]any{"chat_id": w.dest}, "chat")
	if got.int("last_message", "id") != tmp.int("id") {
		t.Errorf("getChat's last message = %v, want the pending %d", got.get("last_message"), tmp.int("id"))
	}
	// Only incoming server messages are read: never a local id.
	if read := tg.MessageID(got.int("last_read_inbox_message_id")); read != 0 && !read.IsServer() {
		t.Errorf("getChat's last_read_inbox_message_id = %d, a local id", read)
	}
}

// A failed send stays in the session's history under its new local id,
// with sending_state failed and the error, until deleteMessages.
func TestFailedSendInHistoryOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 29, SendFailRate: 1})
	c, m := wireWithDocument(t, w)
	failed := sendOutcome(c, w.dest, 0, m)
	if failed.typ() != "updateMessageSendFailed" {
		t.Fatalf("outcome = %v, want a failure", failed)
	}
	id := failed.int("message", "id")
	page := historyPage(t, c, int64(w.dest))
	if len(page) != 1 || page[0].int("id") != id || page[0].str("sending_state", "@type") != "messageSendingStateFailed" ||
		page[0].int("sending_state", "error", "code") != failed.int("error", "code") {
		t.Fatalf("history = %v; want the failed message %d", page, id)
	}
	c.ok(1, "deleteMessages", map[string]any{"chat_id": w.dest, "message_ids": []int64{id}, "revoke": true}, "ok")
	if page := historyPage(t, c, int64(w.dest)); len(page) != 0 {
		t.Fatalf("history after deleting the failed message = %v", page)
	}
}

// A send starts with updateNewMessage of its temporary message, outgoing
// and pending, as TDLib announces it before the outcome.
func TestSendAnnouncesItsTemporaryMessageOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 31})
	c, m := wireWithDocument(t, w)
	res, before := c.call(1, "sendMessage", map[string]any{
		"chat_id": w.dest, "message_thread_id": 0, "reply_to": nil, "options": nil, "reply_markup": nil,
		"input_message_content": map[string]any{
			"@type":    "inputMessageDocument",
			"document": map[string]any{"@type": "inputFileRemote", "id": m.str("content", "document", "document", "remote", "id")},
			"caption":  map[string]any{"@type": "formattedText", "text": "d", "entities": []any{}},
		},
	})
	if res.typ() != "message" {
		t.Fatalf("sendMessage: %v", res)
	}
	isNew := func(o tdObject) bool {
		return o.typ() == "updateNewMessage" && o.int("message", "id") == res.int("id")
	}
	var u tdObject
	if i := slices.IndexFunc(before, isNew); i >= 0 {
		u = before[i]
	} else {
		u, _ = c.until("updateNewMessage of the temporary message", isNew)
	}
	if u.get("message", "is_outgoing") != true || u.str("message", "sending_state", "@type") != "messageSendingStatePending" {
		t.Errorf("updateNewMessage = %v, want the outgoing pending message", u)
	}
}

// A basic group's message newer than the last the instance learned through
// updates answers getMessage with TDLib's 404 until its update comes.
func TestBasicGroupTooNewOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 37})
	group := w.AddChat(tg.KindBasicGroup, "group", "acct1")
	w.Post(group, 0, tgsim.Post{Text: "first"})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	c.ok(1, "getChat", map[string]any{"chat_id": group}, "chat")
	w.Disconnect("acct1", time.Hour)
	late := w.Post(group, 0, tgsim.Post{Text: "late"})
	if res := c.ok(1, "getMessage", map[string]any{"chat_id": group, "message_id": late.ID}, "error"); res.int("code") != 404 {
		t.Fatalf("getMessage of a message newer than the instance knows: %v, want 404", res)
	}
	w.Reconnect("acct1")
	c.until("updateChatLastMessage", func(o tdObject) bool {
		return o.typ() == "updateChatLastMessage" && o.int("chat_id") == int64(group) && o.int("last_message", "id") == int64(late.ID)
	})
	c.ok(1, "getMessage", map[string]any{"chat_id": group, "message_id": late.ID}, "message")
}

// A channel's difference after a reconnect comes after
// connectionStateReady: until then getMessage answers 404 for a message
// posted while the account was offline, and getChat shows the last
// message from before the outage.
func TestChannelDifferenceAfterReadyOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 37, DifferenceDelay: 300 * time.Millisecond})
	before := w.Post(w.channel, 0, tgsim.Post{Text: "before"})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	c.ok(1, "getChat", map[string]any{"chat_id": w.channel}, "chat")
	c.ok(1, "openChat", map[string]any{"chat_id": w.channel}, "ok")
	time.Sleep(400 * time.Millisecond) // the open's own difference
	w.Disconnect("acct1", time.Hour)
	late := w.Post(w.channel, 0, tgsim.Post{Text: "while offline"})
	w.Reconnect("acct1")
	c.until("connectionStateReady", func(o tdObject) bool {
		return o.typ() == "updateConnectionState" && o.str("state", "@type") == "connectionStateReady"
	})
	if res := c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": late.ID}, "error"); res.int("code") != 404 {
		t.Fatalf("getMessage at ready of a message posted offline: %v, want 404", res)
	}
	if res := c.ok(1, "getChat", map[string]any{"chat_id": w.channel}, "chat"); res.int("last_message", "id") != int64(before.ID) {
		t.Fatalf("getChat at ready: %v, want the last message from before the outage (%d)", res, before.ID)
	}
	c.until("updateChatLastMessage", func(o tdObject) bool {
		return o.typ() == "updateChatLastMessage" && o.int("chat_id") == int64(w.channel) && o.int("last_message", "id") == int64(late.ID)
	})
	c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": late.ID}, "message")
}

// A send whose request left the client lands after its session closed
// (HoldInFlight): another account's session that opened the chat is told
// of it as of any new post, with its caption.
func TestSendInFlightLandsAfterCloseOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 37})
	w.AddAccount("acct2", false)
	w.Join("acct2", w.dest)
	c, m := wireWithDocument(t, w)
	c.login(2, t.TempDir(), "acct2")
	c.ok(2, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	c.ok(2, "openChat", map[string]any{"chat_id": w.dest}, "ok")
	w.HoldInFlight(true)
	sendDoc(c, w.dest, 0, m, "message")
	w.HoldInFlight(false)
	c.ok(1, "close", nil, "ok")
	c.until("authorizationStateClosed", func(o tdObject) bool {
		return o.int("@client_id") == 1 && o.typ() == "updateAuthorizationState" &&
			o.str("authorization_state", "@type") == "authorizationStateClosed"
	})
	if n := w.LandInFlight(); n != 1 {
		t.Fatalf("LandInFlight landed %d requests, want 1", n)
	}
	landed := w.Messages(w.dest)
	if len(landed) != 1 {
		t.Fatalf("destination = %+v; want the late send", landed)
	}
	nm, _ := c.until("updateNewMessage of the late send", func(o tdObject) bool {
		return o.int("@client_id") == 2 && o.typ() == "updateNewMessage" && o.int("message", "chat_id") == int64(w.dest)
	})
	if tg.MessageID(nm.int("message", "id")) != landed[0].ID || nm.str("message", "content", "caption", "text") != "d" {
		t.Fatalf("updateNewMessage = %v; want the late send %d", nm, landed[0].ID)
	}
}

// A send made while the account is offline is answered with its pending
// message at once, and its outcome comes only after the reconnect: TDLib
// keeps the message until its connection is back.
func TestSendWhileOfflineSucceedsAfterTheReconnectOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 41})
	c, m := wireWithDocument(t, w)
	w.Disconnect("acct1", 0)
	tmp := sendDoc(c, w.dest, 0, m, "message")
	time.Sleep(200 * time.Millisecond)
	if landed := w.Messages(w.dest); len(landed) != 0 {
		t.Fatalf("the destination holds %+v while the sender is offline, want nothing yet", landed)
	}
	w.Reconnect("acct1")
	ok, _ := c.until("updateMessageSendSucceeded", func(o tdObject) bool {
		return o.typ() == "updateMessageSendSucceeded" && o.int("old_message_id") == tmp.int("id")
	})
	if landed := w.Messages(w.dest); len(landed) != 1 || int64(landed[0].ID) != ok.int("message", "id") {
		t.Fatalf("after the reconnect the destination holds %+v, want the send's message %v", landed, ok.get("message", "id"))
	}
}
