package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// heldDownloads is an account's client whose downloads each wait in
// DownloadFile, reported on entered, until release is closed.
type heldDownloads struct {
	*tgsim.Client
	entered chan int32
	release chan struct{}
}

func (c heldDownloads) DownloadFile(ctx context.Context, id int32) (tg.File, error) {
	c.entered <- id
	select {
	case <-c.release:
	case <-ctx.Done():
		return tg.File{}, ctx.Err()
	}
	return c.Client.DownloadFile(ctx, id)
}

// A backlog found at start goes through catch-up, not the live queue, and
// `workers` bounds it too: with two workers, two of its archives are
// fetched at once, not more.
func TestCatchupIngestsAsManyAtOnceAsWorkers(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	world := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "backlog", "a")
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	posted := postTars(world, src, "held", 6)
	last := posted[len(posted)-1]
	client := heldDownloads{Client: world.Client("a"), entered: make(chan int32, 16), release: make(chan struct{})}
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{src}}}, Destinations: []tg.ChatID{dest},
		Workers: 2, Instance: "only", DrainTimeout: time.Second,
	}, st, func(context.Context, string) (tg.Client, error) { return client, nil })
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())

	for range 2 {
		select {
		case <-client.entered:
		case <-time.After(30 * time.Second): // safety net
			t.Fatal("catch-up fetched fewer than two archives at once")
		}
	}
	// Two are held; a third download would start within this wait if
	// catch-up took more than two messages at once.
	select {
	case id := <-client.entered:
		t.Fatalf("file %d fetched while two were: catch-up ingests more messages at once than the account's workers", id)
	case <-time.After(500 * time.Millisecond):
	}
	close(client.release)
	waitHandled(t, st, last.Key())
}
