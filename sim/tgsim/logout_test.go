package tgsim

import (
	"errors"
	"testing"
	"time"

	"stashd/tg"
)

// A remote logout reaches the account's live sessions as LoggedOut, their
// requests fail 401, a new session is not logged in until LogIn, and the
// other account is untouched.
func TestLogOutAndLogInAgain(t *testing.T) {
	t.Parallel()
	w := sessionWorld(t)
	c := newSession(t, w, "alice")
	other := newSession(t, w, "bob")
	w.LogOut("alice")
	deadline := time.After(10 * time.Second)
	for got := false; !got; {
		select {
		case u := <-c.Updates():
			if lo, ok := u.(tg.LoggedOut); ok {
				if lo.State != tg.AuthStateLoggingOut {
					t.Errorf("LoggedOut state %q", lo.State)
				}
				got = true
			}
		case <-deadline:
			t.Fatal("no LoggedOut update after LogOut")
		}
	}
	var te *tg.Error
	if _, err := c.GetMe(t.Context()); !errors.As(err, &te) || te.Code != 401 {
		t.Errorf("GetMe of a logged-out session: %v, want 401", err)
	}
	go func() { // bob's stream is drained by nobody else
		for range other.Updates() {
		}
	}()
	getMe(t, other)
	if _, err := w.Dial("alice", ""); !errors.Is(err, tg.ErrNotLoggedIn) {
		t.Errorf("Dial while logged out: %v, want ErrNotLoggedIn", err)
	}
	if w.Logouts() != 1 || !w.LoggedOutNow("alice") {
		t.Errorf("Logouts = %d, logged out = %v", w.Logouts(), w.LoggedOutNow("alice"))
	}
	w.LogIn("alice")
	c2, err := w.Dial("alice", "")
	if err != nil {
		t.Fatalf("Dial after LogIn: %v", err)
	}
	go func() {
		for range c2.Updates() {
		}
	}()
	defer c2.Close()
	getMe(t, c2)
}
