package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// A watched basic group upgraded to a supergroup is followed: the new chat
// becomes a source (opened, caught up from its start) and what is posted
// there is mirrored; the old chat keeps its watermark and catalogue
// history. After a restart with the same configuration (the old group
// only) the new chat is still followed.
func TestUpgradedBasicGroupIsFollowed(t *testing.T) {
	ctx := t.Context()
	st := openStore(t, 16)
	world := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	group := world.AddChat(tg.KindBasicGroup, "small group", "a")
	zip := func(name string) tgsim.Post {
		return tgsim.Post{FileName: name, Data: archivetest.Zip([]archivetest.File{{Name: name + ".txt", Data: []byte(name)}})}
	}
	before := world.Post(group, 0, zip("before.zip"))

	cfg := daemon.Config{
		Accounts:     []daemon.Account{{Name: "a", Sources: []tg.ChatID{group}}},
		Destinations: []tg.ChatID{dest}, Workers: 2,
		Ingest:       ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		DrainTimeout: 10 * time.Second,
	}
	start := func() *daemon.Daemon {
		d := daemon.New(cfg, st, func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
		prepareAndRun(t, d)
		return d
	}
	d := start()
	waitHandled(t, st, before.Key())

	to := world.UpgradeBasicGroup(group)
	after := world.Post(to, 0, zip("after.zip"))
	waitHandled(t, st, after.Key())
	d.Shutdown(context.Background())

	old, err := st.GetSource(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if old.UpgradedTo != to || old.Watermark < before.ID.ServerID() {
		t.Errorf("old source %+v; want it marked upgraded to %d, its watermark kept", old, to)
	}
	if _, ok, err := st.MessageHandled(ctx, before.Key()); err != nil || !ok {
		t.Errorf("the old chat's history left the catalogue: %v, %v", ok, err)
	}
	src, err := st.GetSource(ctx, to)
	if err != nil {
		t.Fatalf("the new supergroup is no source: %v", err)
	}
	if src.Account != "a" || src.Kind != tg.KindSupergroup {
		t.Errorf("new source %+v; want a supergroup of account a", src)
	}

	// A restart with the configuration naming the old group only.
	next := world.Post(to, 0, zip("next.zip"))
	d = start()
	waitHandled(t, st, next.Key())
	d.Shutdown(context.Background())

	docs := 0
	for _, m := range world.Messages(dest) {
		if m.Document != nil {
			docs++
		}
	}
	if docs != 3 {
		t.Errorf("%d documents mirrored, want 3 (one before the upgrade, two after)", docs)
	}
}
