package tdjsonsim_test

import (
	"path/filepath"
	"testing"

	"stashd/tg/tgsim"
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
