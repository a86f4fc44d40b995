//go:build libtdjson

package tdjsonsim_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stashd/sim/tdjsonsim"
	"stashd/sim/tgsim"
	"stashd/tg"
	"stashd/tg/tdlib"
)

// serveStandIn serves world to the stand-in library for the test.
func serveStandIn(t *testing.T, world *tgsim.World) string {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "tdjson.sock")
	t.Setenv(tdjsonsim.SocketEnv, sock)
	ln, err := tdjsonsim.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := tdjsonsim.New(world, tdjsonsim.Config{})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return dir
}

// The adapter logs in by QR code: it requests the link, shows it to the
// Authorizer, and asks the two-step password once the other device
// confirmed. Without QRLogin and an Authorizer, the account is reported
// not logged in with its state.
func TestQRLoginThroughTheAdapter(t *testing.T) {
	w := tgsim.NewWorld(tgsim.Config{Seed: 2})
	w.AddAccount("acct1", false)
	w.RequireLogin("acct1", "hunter2")
	dir := serveStandIn(t, w)

	cfg := standinConfig(dir, "acct1")
	_, err := tdlib.New(t.Context(), cfg)
	var nl *tdlib.NotLoggedInError
	if !errors.As(err, &nl) || nl.State != tdlib.StateWaitPhoneNumber {
		t.Fatalf("without a login: %v, want NotLoggedInError in %s", err, tdlib.StateWaitPhoneNumber)
	}

	var seen []string
	cfg.QRLogin = true
	cfg.Authorizer = func(ctx context.Context, st tdlib.AuthState) (string, error) {
		seen = append(seen, st.Name+" "+st.Link)
		if st.Name == tdlib.StateWaitPassword {
			return "hunter2", nil
		}
		return "", nil
	}
	c, err := tdlib.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.GetMe(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != tdlib.StateWaitOtherDeviceConfirmation+" "+w.QRLink("acct1", 1) ||
		!strings.HasPrefix(seen[1], tdlib.StateWaitPassword) {
		t.Errorf("states shown: %q", seen)
	}
}

// getChats and getSupergroup through go-tdlib and the adapter.
func TestDirectoryThroughTheAdapter(t *testing.T) {
	w := tgsim.NewWorld(tgsim.Config{Seed: 2})
	w.AddAccount("acct1", false)
	ch := w.AddChat(tg.KindChannel, "mirror", "acct1")
	w.SetUsername(ch, "my_mirror")
	ro := w.AddChat(tg.KindSupergroup, "readers", "acct1")
	w.SetWriteAccess("acct1", ro, false)
	arch := w.AddChat(tg.KindForum, "forum", "acct1")
	w.SetArchived(arch, true)
	dir := serveStandIn(t, w)
	c, err := tdlib.New(t.Context(), standinConfig(dir, "acct1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		for range c.Updates() {
		}
	}()
	main, err := c.GetChats(t.Context(), false, 100)
	if err != nil || len(main) != 2 {
		t.Fatalf("main list: %v, %v", main, err)
	}
	archive, err := c.GetChats(t.Context(), true, 100)
	if err != nil || len(archive) != 1 || archive[0] != arch {
		t.Fatalf("archive list: %v, %v", archive, err)
	}
	for id, want := range map[tg.ChatID]tg.Supergroup{
		ch:   {Username: "my_mirror", IsChannel: true, Status: tg.MemberAdministrator, CanPost: true},
		ro:   {Status: tg.MemberRestricted},
		arch: {IsForum: true, Status: tg.MemberAdministrator, CanPost: true, CanManageTopics: true},
	} {
		if _, err := c.GetChat(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetSupergroup(t.Context(), id)
		if err != nil || got != want {
			t.Errorf("chat %d: %+v, %v; want %+v", id, got, err, want)
		}
	}
}

// The adapter adds the configured proxy before anything connects: an
// account that reaches Telegram only through it becomes ready.
func TestProxyThroughTheAdapter(t *testing.T) {
	w := tgsim.NewWorld(tgsim.Config{Seed: 2})
	w.AddAccount("acct1", false)
	w.RequireProxy("acct1", "px.example")
	dir := serveStandIn(t, w)
	cfg := standinConfig(dir, "acct1")
	px, err := tg.ParseProxy("mtproto://ee00ff@px.example:443")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Proxy = &px
	c, err := tdlib.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case u := <-c.Updates():
			if s, ok := u.(tg.ConnectionStateChanged); ok && s.State == tg.ConnReady {
				if n := w.Calls("acct1")[tgsim.MethodAddProxy]; n != 1 {
					t.Errorf("addProxy made %d times", n)
				}
				return
			}
		case <-timeout:
			t.Fatal("not ready through the proxy")
		}
	}
}
