package tdjsonsim_test

import (
	"testing"

	"go.uber.org/goleak"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// A process that goes away takes its TDLib instances with it: the server
// ends their sessions and closes their simulated clients, leaving nothing
// running. Not parallel, so that goleak sees only this test's goroutines.
func TestDroppedConnectionLeavesNothingRunning(t *testing.T) {
	w := newWorld(t, tgsim.Config{Seed: 8})
	_, path := startServer(t, w.World)
	// The server's accept loop (and whatever ran before) may stay.
	running := goleak.IgnoreCurrent()

	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	// A second instance of the account needs a directory of its own: TDLib
	// locks its database.
	c.login(2, t.TempDir(), "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	c.ok(1, "openChat", map[string]any{"chat_id": w.channel}, "ok")
	w.Post(w.channel, 0, tgsim.Post{FileName: "e.zip", Data: []byte("PK")})
	if nm := c.update(1, "updateNewMessage"); nm.int("message", "chat_id") != int64(w.channel) {
		t.Fatalf("updateNewMessage: %v", nm)
	}
	c.conn.Close()
	// goleak retries until the goroutines are gone: the connection's
	// reader, its sessions' forwarders and the tgsim clients' pumps.
	goleak.VerifyNone(t, running)

	// The account is served again on a new connection, as after a
	// process restart.
	c2 := dialWire(t, path)
	c2.login(1, w.dir, "acct1")
	c2.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	c2.ok(1, "openChat", map[string]any{"chat_id": w.channel}, "ok")
	posted := w.Post(w.channel, 0, tgsim.Post{Text: "after"})
	if nm := c2.update(1, "updateNewMessage"); tg.MessageID(nm.int("message", "id")) != posted.ID {
		t.Errorf("updateNewMessage after reconnecting: %v", nm)
	}
}
