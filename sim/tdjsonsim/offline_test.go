package tdjsonsim_test

import (
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
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	c.ok(1, "openChat", map[string]any{"chat_id": w.channel}, "ok")
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "f.tar", Data: make([]byte, 100), Caption: "nightly"})
	c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")

	w.Disconnect("acct1", 0)
	c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	search := c.send(1, "searchChatMessages", map[string]any{
		"chat_id": w.channel, "query": "nightly", "sender_id": nil, "from_message_id": 0, "offset": 0, "limit": 10,
		"filter": nil, "message_thread_id": 0, "saved_messages_topic_id": 0,
	})
	quiet := time.After(300 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case o := <-c.lines:
			if o["@extra"] == search {
				t.Fatalf("searchChatMessages answered while the account is offline: %v", o)
			}
		case <-quiet:
			waiting = false
		}
	}
	w.Reconnect("acct1")
	if res, _ := c.until("searchChatMessages answer", func(o tdObject) bool { return o["@extra"] == search }); res.typ() != "foundChatMessages" {
		t.Fatalf("searchChatMessages after the reconnect: %v, want foundChatMessages", res)
	}
}
