package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/daemon"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// resendFloodWait is how long the flood waits of the re-send tests run:
// long enough to restart the daemon inside them.
const resendFloodWait = 15 * time.Second

// A send left pending in the account's TDLib database when the daemon
// stops, to a destination whose own limit refused a send meanwhile (a
// wait of the sends there), is re-sent by TDLib itself as soon as the
// account's client starts again: the restarted daemon must not start the
// client inside the wait.
func TestPendingSendIsNotResentInsideItsChatFloodWait(t *testing.T) {
	t.Parallel()
	testPendingSendAtRestart(t, 38, false)
}

// The same with a wait of every request of the account.
func TestPendingSendIsNotResentInsideAnAccountFloodWait(t *testing.T) {
	t.Parallel()
	testPendingSendAtRestart(t, 39, true)
}

// testPendingSendAtRestart leaves a send pending at a kill of the daemon
// while a flood wait met just before (of every request with accountWide,
// else of the sends to the destination) runs, restarts the daemon inside
// the wait, and checks that no request, TDLib's re-send included, reaches
// Telegram inside the wait, and that the pending send lands once it ends.
func testPendingSendAtRestart(t *testing.T, seed int64, accountWide bool) {
	st := openStore(t, poolConns)
	// The wait reaches the client at once (FloodSitOut < 0): its 15 s
	// stand for a wait longer than TDLib sits out itself.
	world := tgsim.NewWorld(tgsim.Config{Seed: seed, FilesDir: t.TempDir(), ResendAfterRestart: true, FloodSitOut: -1})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "news", "a")
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	dial := func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil }
	if !accountWide {
		world.LimitChatSends(dest, 1/resendFloodWait.Seconds(), 1) // one send, then the wait
	}
	cfg := floodConfig([]daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, dest)
	// A held send gives way soon: the delivery is put off, its send left
	// pending in TDLib.
	cfg.SendTimeout = time.Second
	d := daemon.New(cfg, st, dial)
	prepareAndRun(t, d)

	world.HoldSends(true)
	postTars(world, src, "p", 1)
	for deadline := time.Now().Add(30 * time.Second); world.Calls("a")[tg.MethodSendMessage] == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			d.Kill()
			t.Fatal("the first package was never sent")
		}
	}
	world.HoldSends(false)
	if accountWide {
		world.InjectFloodWait("a", tg.MethodDownloadFile, resendFloodWait, 1)
		postTars(world, src, "w", 1)
		waitPaused(t, d, (*tg.Paced).PausedUntil)
	} else {
		postTars(world, src, "c", 1)
		for deadline := time.Now().Add(30 * time.Second); daemon.DestPause(d, "a", dest) == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				d.Kill()
				t.Fatalf("the destination never paused the account's sends (refused: %d)", world.ChatFlooded(dest))
			}
		}
	}
	d.Kill()
	if n := len(world.Messages(dest)); n != 0 {
		t.Fatalf("the destination holds %d messages before the restart; want the first send pending", n)
	}

	cfg.Registry = prometheus.NewRegistry()
	d = daemon.New(cfg, st, dial)
	prepareAndRun(t, d)
	defer d.Kill()
	// The pending send lands once the account's client starts (and TDLib
	// re-sends it).
	for deadline := time.Now().Add(2 * time.Minute); len(world.Messages(dest)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the send left pending never landed (send stats %+v)", world.SendStats())
		}
	}
	if b := world.FloodWaitBreaches("a"); len(b) != 0 {
		t.Fatalf("%d request(s) reached Telegram inside the account's flood wait after the restart; the first: %s to chat %d with %v of the wait left (TDLib's own re-send: %v)",
			len(b), b[0].Method, b[0].Chat, b[0].Left.Round(time.Millisecond), b[0].Resend)
	}
}
