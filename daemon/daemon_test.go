package daemon_test

import (
	"fmt"

	"context"
	"os"
	"stashd/archive/archivetest"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/ingest"
	"stashd/internal/pgtest"
	"stashd/sim/tgsim"
	"stashd/tg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// A graceful shutdown in the middle of load keeps the watermarks true:
// every document at or below a source's stored watermark is in the
// catalogue, so a restart that resumes from the watermark loses nothing.
func TestShutdownUnderLoadKeepsWatermarksTrue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, 32)
	world := tgsim.NewWorld(tgsim.Config{Seed: 11, FilesDir: t.TempDir()})
	gen := tgsim.NewGenerator(world, tgsim.Scenario{Seed: 11, Sources: 3, Accounts: 1})
	acct := daemon.Account{Name: gen.Accounts()[0]}
	for _, s := range gen.Sources() {
		acct.Sources = append(acct.Sources, s.Chat)
	}
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{acct}, Destinations: gen.Destinations(), Workers: 3, QueueCapacity: 16,
		Ingest:       ingest.Config{SetSettle: 100 * time.Millisecond, SetMaxWait: time.Second},
		DrainTimeout: 20 * time.Second,
	}, st, func(context.Context, string) (tg.Client, error) { return world.Client(acct.Name), nil })
	// A backlog for catch-up, then live traffic, then the stop while the
	// queue and workers are busy.
	for range 80 {
		gen.Step()
	}
	if err := d.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	cycles := d.CatchupCycles()
	if err := d.Run(); err != nil {
		t.Fatal(err)
	}
	for _, done := range cycles {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("no catch-up cycle completed")
		}
	}
	for range 80 {
		gen.Step()
	}
	d.Shutdown(context.Background())

	handled := 0
	for _, chat := range acct.Sources {
		src, err := st.GetSource(ctx, chat)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range world.Messages(chat) {
			if m.Document == nil || m.ID.ServerID() > src.Watermark {
				continue
			}
			if _, ok, err := st.MessageHandled(ctx, m.Key()); err != nil {
				t.Fatal(err)
			} else if !ok {
				t.Errorf("source %d: message %d is below the watermark %d but not in the catalogue",
					chat, m.ID.ServerID(), src.Watermark)
			}
			handled++
		}
	}
	if handled == 0 {
		t.Fatal("no document below any watermark: the test checked nothing")
	}
}

// A graceful shutdown while the delivery stage waits for Telegram's answer
// to a send lets the send finish and records it: no delivery is left an
// intent, and every message in the destination is recorded as sent.
func TestShutdownFinishesTheSendInFlight(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, 8)
	world := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir(), SendLatency: 300 * time.Millisecond})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "busy", "a")
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, Destinations: []tg.ChatID{dest},
		Workers: 2, Instance: "only", DrainTimeout: 10 * time.Second,
	}, st, func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
	prepareAndRun(t, d)
	for i := range 3 {
		name := fmt.Sprintf("p%02d.tar", i)
		world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	}
	intents := func() int {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE state = 'intent'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(30 * time.Second); intents() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			d.Kill()
			t.Fatal("no send started in 30 s")
		}
	}
	d.Shutdown(context.Background())

	if n := intents(); n != 0 {
		t.Errorf("%d deliveries left as intents after a graceful stop", n)
	}
	var sent int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE state = 'sent'`).Scan(&sent); err != nil {
		t.Fatal(err)
	}
	landed := 0
	for _, m := range world.Messages(dest) {
		if m.Document != nil {
			landed++
		}
	}
	if landed == 0 || sent != landed {
		t.Errorf("%d messages in the destination, %d recorded sent; want the send in flight landed and recorded", landed, sent)
	}
}
