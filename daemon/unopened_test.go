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
	o := startOneSource(t, 33, func(w *tgsim.World, src tg.ChatID) {
		// The account's first openChat is its source's, as it starts.
		w.InjectError("a", tg.MethodOpenChat, &tg.Error{Code: 500, Message: "INTERNAL"}, 1)
	})
	waitHandled(t, o.st, o.old.Key())
	if n := o.world.Calls("a")[tg.MethodOpenChat]; n < 2 {
		t.Fatalf("openChat called %d times; want the failed open and the destination's", n)
	}
	waitHandled(t, o.st, o.post("new.7z").Key())
}

// TDLib answers openChat without opening a channel the account is out of.
// A source the account was out of as it started is opened again once
// TDLib reports the account back: its later posts are then told live, not
// left to the rescan.
func TestSourceLostAtStartIsFollowedOnceBack(t *testing.T) {
	t.Parallel()
	o := startOneSource(t, 34, func(w *tgsim.World, src tg.ChatID) { w.LoseAccess(src, true) })
	for deadline := time.Now().Add(30 * time.Second); o.world.Calls("a")[tg.MethodOpenChat] < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the account's start opened neither its source nor its destination")
		}
	}
	o.world.LoseAccess(o.src, false)
	waitHandled(t, o.st, o.old.Key())
	live := o.post("new.7z")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if out, ok, err := o.st.MessageHandled(t.Context(), live.Key()); err == nil && ok && out != store.OutcomePartPending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a post made after the account came back was not handled in 30 s (openChat called %d times)",
				o.world.Calls("a")[tg.MethodOpenChat])
		}
	}
}

// oneSource is a daemon running account a on a world with one source
// channel, holding one archive (old), and one destination.
type oneSource struct {
	st    *store.Store
	world *tgsim.World
	src   tg.ChatID
	old   tg.Message
}

// startOneSource starts a oneSource after fault changed its world; the
// daemon stops when the test ends.
func startOneSource(t *testing.T, seed int64, fault func(w *tgsim.World, src tg.ChatID)) oneSource {
	t.Helper()
	o := oneSource{st: openStore(t, poolConns), world: tgsim.NewWorld(tgsim.Config{Seed: seed, FilesDir: t.TempDir()})}
	o.world.AddAccount("a", false)
	o.src = o.world.AddChat(tg.KindChannel, "releases", "a")
	dest := o.world.AddChat(tg.KindChannel, "mirror", "a")
	o.old = o.post("old.7z")
	fault(o.world, o.src)
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{o.src}}}, Destinations: []tg.ChatID{dest}, Workers: 2,
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second}, DrainTimeout: 10 * time.Second,
	}, o.st, func(context.Context, string) (tg.Client, error) { return o.world.Client("a"), nil })
	prepareAndRun(t, d)
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	return o
}

// post posts a 7z archive named name in the source.
func (o oneSource) post(name string) tg.Message {
	return o.world.Post(o.src, 0, tgsim.Post{FileName: name, Data: archivetest.SevenZip([]archivetest.File{{Name: name, Data: []byte(name)}})})
}
