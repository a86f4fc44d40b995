package tgsim

import (
	"testing"
	"time"

	"stashd/tg"
)

// sessionWorld is a world with accounts alice and bob, both in one channel.
func sessionWorld(t *testing.T) *World {
	t.Helper()
	w := NewWorld(Config{FilesDir: t.TempDir()})
	w.AddAccount("alice", false)
	w.AddAccount("bob", false)
	w.AddChat(tg.KindChannel, "source", "alice", "bob")
	return w
}

func newSession(t *testing.T, w *World, account string) *Client {
	t.Helper()
	c := w.Client(account)
	t.Cleanup(func() { c.Close() })
	return c
}

func getMe(t *testing.T, c *Client) {
	t.Helper()
	if _, err := c.GetMe(t.Context()); err != nil {
		t.Fatalf("GetMe of session %d: %v", c.Session(), err)
	}
}

func TestSessionOverlaps(t *testing.T) {
	t.Parallel()
	t.Run("newer after older", func(t *testing.T) {
		t.Parallel()
		w := sessionWorld(t)
		a, b := newSession(t, w, "alice"), newSession(t, w, "alice")
		getMe(t, a)
		getMe(t, b)
		getMe(t, b)
		if n, ex := w.SessionOverlaps(); n != 0 {
			t.Errorf("overlaps = %d (%v), want 0", n, ex)
		}
	})
	t.Run("older wakes after newer", func(t *testing.T) {
		t.Parallel()
		w := sessionWorld(t)
		a, b := newSession(t, w, "alice"), newSession(t, w, "alice")
		getMe(t, a)
		getMe(t, b)
		if err := a.LoadChats(t.Context()); err != nil {
			t.Fatal(err)
		}
		n, ex := w.SessionOverlaps()
		want := SessionOverlap{Account: "alice", Older: a.Session(), Newer: b.Session(), Method: tg.MethodLoadChats}
		if n == 1 && len(ex) == 1 {
			if ex[0].At.IsZero() {
				t.Errorf("overlap %v carries no time", ex[0])
			}
			ex[0].At = time.Time{}
		}
		if n != 1 || len(ex) != 1 || ex[0] != want {
			t.Errorf("overlaps = %d %v, want 1 [%v]", n, ex, want)
		}
	})
	t.Run("older closed first", func(t *testing.T) {
		t.Parallel()
		w := sessionWorld(t)
		a := newSession(t, w, "alice")
		getMe(t, a)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		b := newSession(t, w, "alice")
		getMe(t, b)
		// The closed session's request is refused before it reaches the
		// server: no overlap either.
		if _, err := a.GetMe(t.Context()); err != tg.ErrClosed {
			t.Fatalf("GetMe after Close: %v, want tg.ErrClosed", err)
		}
		if n, ex := w.SessionOverlaps(); n != 0 {
			t.Errorf("overlaps = %d (%v), want 0", n, ex)
		}
	})
	t.Run("silent older session", func(t *testing.T) {
		t.Parallel()
		// A paused process: its session stays open and makes no request
		// while the newer one works, then it is closed.
		w := sessionWorld(t)
		a := newSession(t, w, "alice")
		getMe(t, a)
		b := newSession(t, w, "alice")
		getMe(t, b)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		getMe(t, b)
		if n, ex := w.SessionOverlaps(); n != 0 {
			t.Errorf("overlaps = %d (%v), want 0", n, ex)
		}
	})
	t.Run("accounts apart", func(t *testing.T) {
		t.Parallel()
		w := sessionWorld(t)
		a, b := newSession(t, w, "alice"), newSession(t, w, "bob")
		getMe(t, b)
		getMe(t, a)
		getMe(t, b)
		if n, ex := w.SessionOverlaps(); n != 0 {
			t.Errorf("overlaps = %d (%v), want 0", n, ex)
		}
	})
	t.Run("examples bounded", func(t *testing.T) {
		t.Parallel()
		w := sessionWorld(t)
		a, b := newSession(t, w, "alice"), newSession(t, w, "alice")
		getMe(t, b)
		for range maxOverlapExamples + 5 {
			getMe(t, a)
		}
		n, ex := w.SessionOverlaps()
		if n != maxOverlapExamples+5 || len(ex) != maxOverlapExamples {
			t.Errorf("overlaps = %d with %d examples, want %d with %d", n, len(ex), maxOverlapExamples+5, maxOverlapExamples)
		}
	})
}

// TDLib re-sends a closed instance's pending sends from its database
// directory: an instance of the account on another directory (another
// process's login) does not, the next one on the same directory does.
func TestResendStaysWithItsDirectory(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendLatency: time.Hour, ResendAfterRestart: true})
	first := f.w.ClientIn("alice", "/a/alice/database")
	if err := first.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	tmp, err := first.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:tok1")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	other := f.w.ClientIn("alice", "/b/alice/database")
	defer other.Close()
	if got := f.w.Messages(f.dest); len(got) != 0 {
		t.Fatalf("landed when an instance on another directory started: %+v", got)
	}
	again := f.w.ClientIn("alice", "/a/alice/database")
	defer again.Close()
	ok := next[tg.SendSucceeded](t, again, nil)
	if truth := f.w.Messages(f.dest); ok.OldMessageID == tmp.ID || len(truth) != 1 || truth[0].Caption != "stashd:tok1" {
		t.Fatalf("re-sent outcome %+v, destination %+v", ok, truth)
	}
}
