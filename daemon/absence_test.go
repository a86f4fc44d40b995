package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/rescan"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// A document replaced by an edit while the account was logged out reaches
// no update: the re-login starts a new TDLib database, which knows nothing
// of what happened meanwhile, and catch-up reads only what is new. An
// account that was not watched for at least the rescan's outage threshold
// rescans its sources when it starts again, so the replacement is mirrored
// then, not hours later at the next periodic rescan.
func TestEditWhileLoggedOutIsMirroredAfterTheAbsence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rw := newRewindWorld(t, 33)
	st := openStore(t, 8)
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{rw.src}}}, Destinations: []tg.ChatID{rw.dest},
		Workers: 2, QueueCapacity: 64,
		Ingest:       ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		Rescan:       rescan.Config{OutageThreshold: time.Second},
		LoginPoll:    100 * time.Millisecond,
		DrainTimeout: 10 * time.Second,
	}, st, func(_ context.Context, account string) (tg.Client, error) { return rw.world.Dial(account, "") })
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())
	key := rw.post(1)
	rw.waitAll(t, st)

	rw.world.LogOut("a")
	edit := rw.world.EditMessageMedia(rw.src, key.Message, tgsim.Post{FileName: "a001.zip",
		Data: archivetest.Zip([]archivetest.File{{Name: "f.txt", Data: []byte("replaced while logged out")}})})
	time.Sleep(1500 * time.Millisecond) // longer than the outage threshold
	rw.world.LogIn("a")

	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, m := range rw.world.Messages(rw.dest) {
			if m.Document != nil && m.Document.File.UniqueID == edit.NewUniqueID {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the document an edit put in while the account was logged out was never mirrored")
		}
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
