package tdjsonsim_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// getChatHistory is answered with a messages object, newest first from
// from_message_id (inclusive); the wire checker holds request and answer
// to TDLib's schema.
func TestGetChatHistoryOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 23})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	a := w.Post(w.channel, 0, tgsim.Post{FileName: "a.zip", Data: []byte("PK")})
	b := w.Post(w.channel, 0, tgsim.Post{Text: "between"})
	cc := w.Post(w.channel, 0, tgsim.Post{FileName: "c.zip", Data: []byte("PK")})

	page := c.ok(1, "getChatHistory", map[string]any{"chat_id": w.channel, "from_message_id": 0, "offset": 0, "limit": 2, "only_local": false}, "messages")
	msgs, _ := page.get("messages").([]any)
	if len(msgs) != 2 || page.int("total_count") != 2 {
		t.Fatalf("first page: %v, want 2 messages", page)
	}
	if got := tdObject(msgs[0].(map[string]any)).int("id"); got != int64(cc.ID) {
		t.Errorf("first page starts at %d, want the newest %d", got, cc.ID)
	}
	if got := tdObject(msgs[1].(map[string]any)).int("id"); got != int64(b.ID) {
		t.Errorf("first page ends at %d, want %d", got, b.ID)
	}
	page = c.ok(1, "getChatHistory", map[string]any{"chat_id": w.channel, "from_message_id": b.ID, "offset": 0, "limit": 100, "only_local": false}, "messages")
	msgs, _ = page.get("messages").([]any)
	if len(msgs) != 2 || tdObject(msgs[1].(map[string]any)).int("id") != int64(a.ID) {
		t.Errorf("from %d: %v, want it and %d", b.ID, page, a.ID)
	}
	if res := c.ok(1, "getChatHistory", map[string]any{"chat_id": w.channel, "from_message_id": 0, "offset": 0, "limit": 0, "only_local": false}, "error"); res.int("code") != 400 {
		t.Errorf("limit 0: %v, want a 400", res)
	}
}

// getChatHistory from the end starts at the last message the instance's
// database knows (MessagesManager::get_history_impl asks the server for
// the end only when no last message is known): an instance restarted on
// its database directory does not see, from the end, a message posted
// while it did not run, until it opens the chat.
func TestGetChatHistoryFromTheEndOfARestartedInstance(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 23})
	_, path := startServer(t, w.World)
	dir := filepath.Join(w.dir, "instance1")
	newest := func(c *wire) int64 {
		t.Helper()
		page := c.ok(1, "getChatHistory", map[string]any{"chat_id": w.channel, "from_message_id": 0, "offset": 0, "limit": 100, "only_local": false}, "messages")
		msgs, _ := page.get("messages").([]any)
		if len(msgs) == 0 {
			t.Fatalf("empty page: %v", page)
		}
		return tdObject(msgs[0].(map[string]any)).int("id")
	}
	first := w.Post(w.channel, 0, tgsim.Post{Text: "first"})
	c := dialWire(t, path)
	c.login(1, dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	if got := newest(c); got != int64(first.ID) {
		t.Fatalf("newest %d, want %d", got, first.ID)
	}
	c.ok(1, "close", nil, "ok")
	c.until("authorizationStateClosed", func(o tdObject) bool {
		return o.typ() == "updateAuthorizationState" && o.str("authorization_state", "@type") == "authorizationStateClosed"
	})
	later := w.Post(w.channel, 0, tgsim.Post{Text: "later"})

	again := dialWire(t, path)
	again.login(1, dir, "acct1")
	again.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	if got := newest(again); got != int64(first.ID) {
		t.Errorf("restarted instance: newest %d, want the database's last message %d (%d was posted while it did not run)", got, first.ID, later.ID)
	}
	again.ok(1, "openChat", map[string]any{"chat_id": w.channel}, "ok")
	if got := newest(again); got != int64(later.ID) {
		t.Errorf("after openChat: newest %d, want %d", got, later.ID)
	}
}

// openChat starts the chat's difference and answers at once: with
// DifferenceDelay the session shows the chat as its database knew it
// (getChat, getChatHistory from the end) until the difference is in, and
// then announces the newer last message (updateChatLastMessage).
func TestOpenChatFetchesTheDifferenceLater(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	w := newWorld(t, tgsim.Config{Seed: 23, DifferenceDelay: delay})
	again, first, later := restartedAfterAPost(t, w)
	brought := func(o tdObject) bool {
		return o.typ() == "updateChatLastMessage" && o.int("chat_id") == int64(w.channel) && o.int("last_message", "id") == int64(later.ID)
	}
	// A machine that stalls longer than the delay may see the difference
	// come in before getChat is answered: the answer then is the later
	// message, and the update came before it, but not before the delay.
	asked := time.Now()
	opened, seen := again.call(1, "openChat", map[string]any{"chat_id": w.channel})
	if opened.typ() != "ok" {
		t.Fatalf("openChat: got %v, want ok", opened)
	}
	chat, before := again.call(1, "getChat", map[string]any{"chat_id": w.channel})
	seen = append(seen, before...)
	in := slices.ContainsFunc(seen, brought)
	if got := chat.int("last_message", "id"); chat.typ() != "chat" || got != int64(first.ID) && !in {
		t.Errorf("right after openChat: %v (last message %d), want the database's %d until the difference is in", chat.typ(), got, first.ID)
	}
	if in && time.Since(asked) < delay {
		t.Errorf("the difference came in %s after openChat, before its delay of %s", time.Since(asked), delay)
	}
	if !in {
		again.until("updateChatLastMessage", brought)
	}
	if got := again.ok(1, "getChat", map[string]any{"chat_id": w.channel}, "chat").int("last_message", "id"); got != int64(later.ID) {
		t.Errorf("after the difference: last message %d, want %d", got, later.ID)
	}
}

// A channel's message newer than the last one the session learned through
// updates is dropped from a server answer (MessagesManager::
// add_message_to_dialog ignores a "too new message not from update") and
// the chat's difference is fetched instead, which brings it as
// updateNewMessage.
func TestTooNewMessageComesByTheDifference(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 23})
	again, _, later := restartedAfterAPost(t, w)
	// The difference may bring the message before the 404 is written
	// back, or after it.
	res, before := again.call(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": later.ID})
	if res.typ() != "error" || res.int("code") != 404 {
		t.Errorf("getMessage of a message newer than the session's last: %v, want a 404", res)
	}
	brought := func(o tdObject) bool {
		return o.typ() == "updateNewMessage" && o.int("message", "id") == int64(later.ID)
	}
	if !slices.ContainsFunc(before, brought) {
		again.until("updateNewMessage", brought)
	}
	again.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": later.ID}, "message")
}

// restartedAfterAPost serves w, lets an instance's session look at its
// channel (getChat learns the last message, first), closes it, posts
// later while no session of that directory runs, and returns a session
// started again on the same directory, its chats loaded.
func restartedAfterAPost(t *testing.T, w *world) (again *wire, first, later tg.Message) {
	t.Helper()
	_, path := startServer(t, w.World)
	dir := filepath.Join(w.dir, "instance1")
	first = w.Post(w.channel, 0, tgsim.Post{Text: "first"})
	c := dialWire(t, path)
	c.login(1, dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	if got := c.ok(1, "getChat", map[string]any{"chat_id": w.channel}, "chat").int("last_message", "id"); got != int64(first.ID) {
		t.Fatalf("getChat: last message %d, want %d", got, first.ID)
	}
	c.ok(1, "close", nil, "ok")
	c.until("authorizationStateClosed", func(o tdObject) bool {
		return o.typ() == "updateAuthorizationState" && o.str("authorization_state", "@type") == "authorizationStateClosed"
	})
	later = w.Post(w.channel, 0, tgsim.Post{Text: "later"})
	again = dialWire(t, path)
	again.login(1, dir, "acct1")
	again.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	return again, first, later
}
