package tdjsonsim_test

import (
	"slices"
	"testing"
	"time"

	"stashd/sim/tgsim"
)

// While the account is offline a request the session's database answers
// is answered at once, and one only the server can answer (a full-text
// search) gets no answer on the wire until the connection is back: TDLib
// keeps the query, and answers it then.
func TestServerRequestWaitsForTheConnectionOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 2})
	c := readyWire(t, w)
	c.ok(1, "openChat", map[string]any{"chat_id": w.channel}, "ok")
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "f.tar", Data: make([]byte, 100), Caption: "nightly"})
	c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")

	w.Disconnect("acct1", 0)
	c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	search := c.send(1, "searchChatMessages", map[string]any{
		"chat_id": w.channel, "query": "nightly", "sender_id": nil, "from_message_id": 0, "offset": 0, "limit": 10,
		"filter": nil, "message_thread_id": 0, "saved_messages_topic_id": 0,
	})
	unanswered(t, c, search, "searchChatMessages")
	w.Reconnect("acct1")
	if res, _ := c.until("searchChatMessages answer", func(o tdObject) bool { return o["@extra"] == search }); res.typ() != "foundChatMessages" {
		t.Fatalf("searchChatMessages after the reconnect: %v, want foundChatMessages", res)
	}
}

// A deletion while the account is offline shows on the wire as TDLib's:
// updateDeleteMessages at once, from the session's own database, and the
// request's ok only once the server deleted the message, after the
// reconnect.
func TestOfflineDeletionOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 17})
	c, m := wireWithDocument(t, w)
	sent := sendCopy(c, w.dest, m, "d.zip\nstashd:78")

	w.Disconnect("acct1", 0)
	del := c.send(1, "deleteMessages", map[string]any{"chat_id": w.dest, "message_ids": []int64{sent}, "revoke": true})
	seen := unanswered(t, c, del, "deleteMessages")
	if !slices.ContainsFunc(seen, func(o tdObject) bool {
		return o.typ() == "updateDeleteMessages" && o.int("chat_id") == int64(w.dest) && o.get("is_permanent") == true
	}) {
		t.Fatal("no updateDeleteMessages while the deletion waits for the connection; TDLib deletes from its database at once")
	}
	if got := len(w.Messages(w.dest)); got != 1 {
		t.Fatalf("the destination holds %d messages while the deletion waits for the connection, want 1", got)
	}
	w.Reconnect("acct1")
	if res, _ := c.until("deleteMessages answer", func(o tdObject) bool { return o["@extra"] == del }); res.typ() != "ok" {
		t.Fatalf("deleteMessages after the reconnect: %v, want ok", res)
	}
	if got := w.Messages(w.dest); len(got) != 0 {
		t.Errorf("the destination still holds %v after the reconnect", got)
	}
}

// On a database directory that never loaded the chat lists, loadChats
// asks the server: while the account is offline it gets no answer on the
// wire until the reconnect. An instance on a directory that loaded them
// before reads them from its database at once.
func TestLoadChatsOnAFreshDirectoryWaitsOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 2})
	c := readyWire(t, w)

	c.ok(1, "close", nil, "ok")
	c.until("authorizationStateClosed", func(o tdObject) bool {
		return o.typ() == "updateAuthorizationState" && o.str("authorization_state", "@type") == "authorizationStateClosed"
	})

	w.Disconnect("acct1", 0)
	c.login(2, w.dir, "acct1")
	c.ok(2, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	c.login(3, t.TempDir(), "acct1")
	load := c.send(3, "loadChats", map[string]any{"chat_list": nil, "limit": 100})
	unanswered(t, c, load, "loadChats on a fresh directory")
	w.Reconnect("acct1")
	if res, _ := c.until("loadChats answer", func(o tdObject) bool { return o["@extra"] == load }); res.typ() != "ok" {
		t.Fatalf("loadChats on a fresh directory after the reconnect: %v, want ok", res)
	}
}

// unanswered reads the wire for 300 ms and fails the test if the request
// sent as extra is answered meanwhile, as what while the account is
// offline; it returns what came instead.
func unanswered(t *testing.T, c *wire, extra string, what string) []tdObject {
	t.Helper()
	var seen []tdObject
	quiet := time.After(300 * time.Millisecond)
	for {
		select {
		case o := <-c.lines:
			if o["@extra"] == extra {
				t.Fatalf("%s answered while the account is offline: %v", what, o)
			}
			seen = append(seen, o)
		case <-quiet:
			return seen
		}
	}
}
