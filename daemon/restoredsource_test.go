package daemon_test

import (
	"context"
	"path/filepath"
	"testing"

	"stashd/daemon"
	"stashd/internal/pgembed"
	"stashd/internal/pgtest"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// A watched basic group is upgraded to a supergroup after a dump was
// taken: the daemon follows the supergroup, a source of its own from then
// on. The dump, restored under the running daemon (which keeps its lease:
// the dump holds it), lacks that source and what it brought. The daemon
// registers the source again at the identity check that names the
// restore, and catch-up reads its archives again: each is catalogued, the
// one posted after the restore too, and none reaches the destination
// twice.
func TestSourceTheRestoredDumpLacksIsRegisteredAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.New(t)
	st := openStoreAt(t, url, poolConns)
	world := tgsim.NewWorld(tgsim.Config{Seed: 43, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	group := world.AddChat(tg.KindBasicGroup, "small group", "a")
	d := daemon.New(floodConfig([]daemon.Account{{Name: "a", Sources: []tg.ChatID{group}}}, dest), st,
		func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())
	waitHandled(t, st, world.Post(group, 0, zipPost("before.zip")).Key())
	backup := filepath.Join(t.TempDir(), "catalogue.dump")
	if err := pgembed.Dump(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}

	to := world.UpgradeBasicGroup(group)
	keys := []tg.MessageKey{world.Post(to, 0, zipPost("after1.zip")).Key(), world.Post(to, 0, zipPost("after2.zip")).Key()}
	for _, k := range keys {
		waitHandled(t, st, k)
	}
	if err := pgembed.Restore(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetSource(ctx, to); err == nil {
		t.Fatal("the restored dump records the supergroup: the test proves nothing")
	}
	keys = append(keys, world.Post(to, 0, zipPost("restored.zip")).Key())
	for _, k := range keys {
		waitHandled(t, st, k)
	}
	seen := map[string]int{}
	for _, m := range world.Messages(dest) {
		if m.Document != nil {
			seen[m.Document.FileName]++
		}
	}
	for _, name := range []string{"before.zip", "after1.zip", "after2.zip", "restored.zip"} {
		if seen[name] != 1 {
			t.Errorf("the destination holds %s %d times, want once (all: %v)", name, seen[name], seen)
		}
	}
	if _, err := st.GetSource(ctx, to); err != nil {
		t.Errorf("the supergroup is not recorded again: %v", err)
	}
}
