package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// A channel's updates, its last message with them, reach only a session
// that opened it. A source whose openChat failed as the account started
// is opened by its next scan: its posts are then told live, and getChat's
// last message, which a session not following the chat never moves, is
// not taken to mean the source is current.
func TestSourceNotOpenedAtStartIsFollowedAfterItsScan(t *testing.T) {
	t.Parallel()
	st := openStore(t, 16)
	world := tgsim.NewWorld(tgsim.Config{Seed: 33, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "releases", "a")
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	old := world.Post(src, 0, tgsim.Post{FileName: "old.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "o", Data: []byte("old")}})})
	// The account's first openChat is its source's, as it starts.
	world.InjectError("a", tg.MethodOpenChat, &tg.Error{Code: 500, Message: "INTERNAL"}, 1)
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, Destinations: []tg.ChatID{dest}, Workers: 2,
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second}, DrainTimeout: 10 * time.Second,
	}, st, func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())
	waitHandled(t, st, old.Key())
	if n := world.Calls("a")[tg.MethodOpenChat]; n < 2 {
		t.Fatalf("openChat called %d times; want the failed open and the destination's", n)
	}
	live := world.Post(src, 0, tgsim.Post{FileName: "new.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "n", Data: []byte("new")}})})
	waitHandled(t, st, live.Key())
}

// TDLib answers openChat without opening a channel the account is out of.
// A source the account was out of as it started is opened again once
// TDLib reports the account back: its later posts are then told live, not
// left to the rescan.
func TestSourceLostAtStartIsFollowedOnceBack(t *testing.T) {
	t.Parallel()
	st := openStore(t, 16)
	world := tgsim.NewWorld(tgsim.Config{Seed: 34, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "releases", "a")
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	old := world.Post(src, 0, tgsim.Post{FileName: "old.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "o", Data: []byte("old")}})})
	world.LoseAccess(src, true)
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, Destinations: []tg.ChatID{dest}, Workers: 2,
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second}, DrainTimeout: 10 * time.Second,
	}, st, func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())
	for deadline := time.Now().Add(30 * time.Second); world.Calls("a")[tg.MethodOpenChat] < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the account's start opened neither its source nor its destination")
		}
	}
	world.LoseAccess(src, false)
	waitHandled(t, st, old.Key())
	live := world.Post(src, 0, tgsim.Post{FileName: "new.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "n", Data: []byte("new")}})})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if out, ok, err := st.MessageHandled(t.Context(), live.Key()); err == nil && ok && out != store.OutcomePartPending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a post made after the account came back was not handled in 30 s (openChat called %d times)",
				world.Calls("a")[tg.MethodOpenChat])
		}
	}
}
