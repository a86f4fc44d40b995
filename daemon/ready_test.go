package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// A moment away from Telegram (TDLib reconnecting) leaves the instance
// ready; only a disconnect longer than ReadyConnGrace makes it unready, and
// the reconnect makes it ready again.
func TestReadinessOutlastsABriefDisconnect(t *testing.T) {
	t.Parallel()
	st := openStore(t, 8)
	w := tgsim.NewWorld(tgsim.Config{Seed: 51, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	src := w.AddChat(tg.KindChannel, "source", "a")
	dest := w.AddChat(tg.KindChannel, "mirror", "a")
	grace := 800 * time.Millisecond
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, Destinations: []tg.ChatID{dest},
		Workers: 1, QueueCapacity: 8, ReadyConnGrace: grace,
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
	}, st, func(context.Context, string) (tg.Client, error) { return w.Client("a"), nil })
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())
	ctx := t.Context()
	waitReady := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for d.Ready(ctx) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not ready: %v", what, d.Ready(ctx))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitReady("after start")

	w.Disconnect("a", time.Hour)
	time.Sleep(grace / 4)
	if err := d.Ready(ctx); err != nil {
		t.Fatalf("%v into a disconnect: %v; a moment away must stay ready", grace/4, err)
	}
	time.Sleep(grace + 200*time.Millisecond)
	if err := d.Ready(ctx); err == nil {
		t.Fatalf("still ready %v into a disconnect, past the %v grace", grace+grace/4, grace)
	}
	w.Reconnect("a")
	waitReady("after the reconnect")
}
