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

// A source named by @username that changes its name keeps being mirrored:
// the chat id the name first resolved to is kept, and the change is
// recorded for `stashd status`.
func TestRenamedSourceKeepsItsChat(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	world := tgsim.NewWorld(tgsim.Config{Seed: 31, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "releases", "a")
	world.SetUsername(src, "releases")
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	run := func() *daemon.Daemon {
		d := daemon.New(daemon.Config{
			Accounts: []daemon.Account{{Name: "a", Named: []string{"releases"}}}, Destinations: []tg.ChatID{dest}, Workers: 2,
			Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second}, DrainTimeout: 10 * time.Second,
		}, st, func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
		prepareAndRun(t, d)
		return d
	}
	d := run()
	first := world.Post(src, 0, tgsim.Post{FileName: "one.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "1", Data: []byte("one")}})})
	waitHandled(t, st, first.Key())
	d.Shutdown(context.Background())

	world.SetUsername(src, "releases_archive")
	d = run()
	defer d.Shutdown(context.Background())
	second := world.Post(src, 0, tgsim.Post{FileName: "two.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "2", Data: []byte("two")}})})
	waitHandled(t, st, second.Key())
	renamed, err := st.RenamedNames(t.Context())
	if err != nil || len(renamed) != 1 || renamed[0].Username != "releases" || renamed[0].ChatID != src || renamed[0].CurrentChatID != 0 {
		t.Fatalf("renamed names = %+v, %v; want @releases kept on chat %d", renamed, err, src)
	}
	if rep, err := st.Status(t.Context()); err != nil || len(rep.RenamedNames) != 1 {
		t.Fatalf("status renamed names = %+v, %v; want the one", rep.RenamedNames, err)
	}
}

// A public channel the account never joined is a source like any other:
// it is opened, so its new messages arrive live, and TDLib's "left"
// status is no access alarm. Status says the account reads it as a
// non-member.
func TestPublicSourceWithoutMembership(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	world := tgsim.NewWorld(tgsim.Config{Seed: 32, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "public releases") // no members
	world.SetUsername(src, "pubreleases")
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	old := world.Post(src, 0, tgsim.Post{FileName: "old.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "o", Data: []byte("old")}})})
	d := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Named: []string{"pubreleases"}}}, Destinations: []tg.ChatID{dest}, Workers: 2,
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second}, DrainTimeout: 10 * time.Second,
	}, st, func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())
	waitHandled(t, st, old.Key())
	live := world.Post(src, 0, tgsim.Post{FileName: "new.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "n", Data: []byte("new")}})})
	waitHandled(t, st, live.Key())

	deadline := time.Now().Add(time.Minute)
	for {
		s, err := st.GetSource(t.Context(), src)
		if err != nil {
			t.Fatal(err)
		}
		if s.Access == store.AccessNotMember {
			break
		}
		if s.Access == store.AccessLost {
			t.Fatalf("source recorded inaccessible (%s): a false alarm", s.AccessReason)
		}
		if time.Now().After(deadline) {
			t.Fatalf("source access = %q, want %q", s.Access, store.AccessNotMember)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var docs int
	for _, m := range world.Messages(dest) {
		if m.Document != nil {
			docs++
		}
	}
	if docs != 2 {
		t.Errorf("destination holds %d documents, want 2", docs)
	}
}
