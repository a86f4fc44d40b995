package daemon_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

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
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, poolConns)
	world := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	group := world.AddChat(tg.KindBasicGroup, "small group", "a")
	before := world.Post(group, 0, zipPost("before.zip"))

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
	after := world.Post(to, 0, zipPost("after.zip"))
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
	next := world.Post(to, 0, zipPost("next.zip"))
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

// A basic group two accounts list, read by the first, is upgraded to a
// supergroup; then that account goes away (logged out). The other account
// lists the supergroup as it lists the group, whether it ran through the
// upgrade or started after it: it takes over the supergroup, catalogues
// and delivers what is posted there afterwards, and takes the deliveries
// queued for the account away from it (here held because that account may
// not write to the destination).
func TestUpgradeOfASharedBasicGroupIsFollowedByEveryAccountListingIt(t *testing.T) {
	t.Parallel()
	t.Run("upgraded while both run", func(t *testing.T) { sharedUpgradeRun(t, false) })
	t.Run("second account started after the upgrade", func(t *testing.T) { sharedUpgradeRun(t, true) })
}

func sharedUpgradeRun(t *testing.T, bLater bool) {
	ctx := t.Context()
	st := openStore(t, 32)
	world := tgsim.NewWorld(tgsim.Config{Seed: 41, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	world.AddAccount("b", false)
	dest := world.AddChat(tg.KindChannel, "mirror", "a", "b")
	group := world.AddChat(tg.KindBasicGroup, "small group", "a", "b")
	world.SetWriteAccess("a", dest, false)
	// Two instances sharing the database, one running each account: a's
	// deliveries stay queued for it, no other account of its instance to
	// hand them to. b's lease is held for the second instance before the
	// first starts.
	if _, ok, err := st.AcquireLease(ctx, "b", "two", time.Minute, ""); err != nil || !ok {
		t.Fatalf("lease of b for the second instance: %v, %v", ok, err)
	}
	logs := &lockedBuffer{}
	start := func(instance string) {
		d := daemon.New(daemon.Config{
			Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("instance", instance),
			Accounts:     []daemon.Account{{Name: "a", Sources: []tg.ChatID{group}}, {Name: "b", Sources: []tg.ChatID{group}}},
			Destinations: []tg.ChatID{dest}, Workers: 2, DrainTimeout: 5 * time.Second, Instance: instance,
			Ingest:    ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
			Delivery:  ingest.DeliveryConfig{Interval: 50 * time.Millisecond, RetryDelay: 100 * time.Millisecond},
			LoginPoll: 100 * time.Millisecond,
		}, st, func(_ context.Context, account string) (tg.Client, error) { return world.Dial(account, instance) })
		daemon.SetSharedInterval(d, 50*time.Millisecond)
		prepareAndRun(t, d)
		t.Cleanup(func() { d.Shutdown(context.Background()) })
	}
	start("one")
	if !bLater {
		start("two")
	}
	to := world.UpgradeBasicGroup(group)
	waitFor(t, "the supergroup recorded as a's source", func() bool {
		src, err := st.GetSource(ctx, to)
		return err == nil && src.Account == "a"
	})
	if bLater {
		start("two")
	}
	held := postTars(world, to, "held", 1)[0]
	waitFor(t, "the package posted in the supergroup catalogued by a, its delivery queued for a", func() bool {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM waiting_deliveries WHERE account = 'a' AND source_chat_id = $1`,
			int64(to)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})

	world.LogOut("a")
	waitFor(t, "account a recorded as logged out", func() bool { return !authOf(t, st, "a").LoggedIn })
	after := postTars(world, to, "after", 1)[0]
	deadline := time.Now().Add(time.Minute)
	for {
		_, ok, err := st.MessageHandled(ctx, after.Key())
		if err != nil {
			t.Fatal(err)
		}
		docs := 0
		for _, m := range world.Messages(dest) {
			if m.Document != nil {
				docs++
			}
		}
		if ok && docs >= 2 {
			break
		}
		if time.Now().After(deadline) {
			src, _ := st.GetSource(ctx, to)
			var queued []string
			rows, _ := st.Pool().Query(ctx, `SELECT account FROM waiting_deliveries`)
			for rows.Next() {
				var a string
				_ = rows.Scan(&a)
				queued = append(queued, a)
			}
			rows.Close()
			t.Fatalf("after a went away: the supergroup's later archive handled %v, %d of 2 documents delivered; "+
				"the supergroup is recorded for %s, deliveries queued for %v; the daemons' log:\n%s", ok, docs, src.Account, queued, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkOnce(t, world, dest, []tg.Message{held, after})
}
