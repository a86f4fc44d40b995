package tdjsonsim_test

import (
	"path/filepath"
	"testing"
	"time"

	"stashd/sim/tgsim"
)

// Two processes running one account, each with a TDLib directory of its
// own (a fresh login per instance): each is a logged-in session of the same
// user, and the world counts a request of the older session made after the
// newer one started making requests.
func TestOverlappingSessionsOnTheWire(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// run makes the requests of the two processes, older and newer.
		run      func(older, newer *wire)
		overlaps int
	}{
		{"older then newer", func(older, newer *wire) {
			older.ok(1, "getMe", nil, "user")
			newer.ok(1, "getMe", nil, "user")
		}, 0},
		{"older wakes after newer", func(older, newer *wire) {
			older.ok(1, "getMe", nil, "user")
			newer.ok(1, "getMe", nil, "user")
			older.ok(1, "getMe", nil, "user")
		}, 1},
		{"older gone before newer", func(older, newer *wire) {
			older.ok(1, "getMe", nil, "user")
			older.conn.Close() // the process dies: its instance goes with it
			newer.ok(1, "getMe", nil, "user")
		}, 0},
		{"older closes without a request", func(older, newer *wire) {
			// A paused owner that resumes and only closes its instance
			// (close is answered by TDLib itself, not the server).
			older.ok(1, "getMe", nil, "user")
			newer.ok(1, "getMe", nil, "user")
			older.ok(1, "getAuthorizationState", nil, "authorizationStateReady")
			older.ok(1, "close", nil, "ok")
			newer.ok(1, "getMe", nil, "user")
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tgsim.Config{Seed: 11})
			_, path := startServer(t, w.World)
			older, newer := dialWire(t, path), dialWire(t, path)
			older.login(1, filepath.Join(w.dir, "instance1"), "acct1")
			newer.login(1, filepath.Join(w.dir, "instance2"), "acct1")
			tc.run(older, newer)
			if n, ex := w.SessionOverlaps(); n != tc.overlaps {
				t.Errorf("overlaps = %d %v, want %d", n, ex, tc.overlaps)
			}
		})
	}
}

// A second TDLib directory of an account is a second login of the same
// user, not another account.
func TestSecondDirectoryIsTheSameUser(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 12})
	_, path := startServer(t, w.World)
	a, b := dialWire(t, path), dialWire(t, path)
	a.login(1, filepath.Join(w.dir, "instance1"), "acct1")
	b.login(1, filepath.Join(w.dir, "instance2"), "acct1")
	meA, meB := a.ok(1, "getMe", nil, "user"), b.ok(1, "getMe", nil, "user")
	if meA.int("id") == 0 || meA.int("id") != meB.int("id") {
		t.Errorf("getMe: %v and %v, want one user", meA, meB)
	}
}

// A send an instance left pending is re-sent by the next instance on its
// database directory, as TDLib re-sends from the directory's binlog; an
// instance of the same account on another directory knows nothing of it.
func TestResendOnlyFromItsDirectory(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 13, SendLatency: time.Hour, ResendAfterRestart: true})
	_, path := startServer(t, w.World)
	first := dialWire(t, path)
	first.login(1, filepath.Join(w.dir, "instance1"), "acct1")
	first.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "d.zip", Data: []byte("PK")})
	m := first.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	tmp := first.ok(1, "sendMessage", map[string]any{
		"chat_id": w.dest,
		"input_message_content": map[string]any{
			"@type":    "inputMessageDocument",
			"document": map[string]any{"@type": "inputFileRemote", "id": m.str("content", "document", "document", "remote", "id")},
		},
	}, "message")
	first.ok(1, "close", nil, "ok")
	first.until("authorizationStateClosed", func(o tdObject) bool {
		return o.typ() == "updateAuthorizationState" && o.str("authorization_state", "@type") == "authorizationStateClosed"
	})

	other := dialWire(t, path)
	other.login(1, filepath.Join(w.dir, "instance2"), "acct1")
	if got := w.Messages(w.dest); len(got) != 0 {
		t.Fatalf("the send landed when an instance on another directory started: %v", got)
	}

	again := dialWire(t, path)
	again.login(1, filepath.Join(w.dir, "instance1"), "acct1")
	ok, _ := again.until("the re-sent outcome", func(o tdObject) bool { return o.typ() == "updateMessageSendSucceeded" })
	// TDLib re-sends it under a new temporary id, not the one the closed
	// instance answered with.
	if ok.int("old_message_id") == tmp.int("id") || len(w.Messages(w.dest)) != 1 {
		t.Errorf("re-sent outcome %v (first temporary id %d), destination %v", ok, tmp.int("id"), w.Messages(w.dest))
	}
}
