package daemon_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// A daemon killed mid-scan leaves its source claims behind. Its restart, a
// new process on the same host, releases them and catches up at once
// instead of waiting ten minutes for them to expire.
func TestRestartReleasesClaimsOfDeadProcess(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, 32)
	world := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir()})
	gen := tgsim.NewGenerator(world, tgsim.Scenario{Seed: 5, Sources: 2, Accounts: 1})
	acct := daemon.Account{Name: gen.Accounts()[0]}
	for _, s := range gen.Sources() {
		acct.Sources = append(acct.Sources, s.Chat)
	}
	// The pid of a process that has exited: the killed daemon.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	deadOwner := fmt.Sprintf("%s:%d", host, gone.Process.Pid)
	cfg := func(instance string) daemon.Config {
		return daemon.Config{
			Accounts: []daemon.Account{acct}, Destinations: gen.Destinations(), Workers: 2, QueueCapacity: 16,
			Ingest:   ingest.Config{SetSettle: 100 * time.Millisecond, SetMaxWait: time.Second},
			Instance: instance,
		}
	}
	dial := func(context.Context, string) (tg.Client, error) { return world.Client(acct.Name), nil }

	first := daemon.New(cfg(deadOwner), st, dial)
	prepareAndRun(t, first)
	first.Kill()
	// It died holding its claims, mid-scan (a scan it finished before the
	// kill set the next one later: the sources are made due again, as they
	// were when it claimed them); meanwhile the sources got messages whose
	// updates reached no one.
	if _, err := st.Pool().Exec(ctx, `UPDATE sources SET next_scan_at = now()`); err != nil {
		t.Fatal(err)
	}
	claimed, err := st.ClaimSources(ctx, acct.Name, deadOwner, acct.Sources, 10*time.Minute)
	if err != nil || len(claimed) != len(acct.Sources) {
		t.Fatalf("claim the sources as the dead process: %d claimed, %v", len(claimed), err)
	}
	for range 30 {
		gen.Step()
	}

	second := daemon.New(cfg(""), st, dial)
	prepareAndRun(t, second)
	defer second.Shutdown(context.Background())
	// Its lease names a dead process: taking it released the account's
	// claims held by anyone else.
	var held int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM sources WHERE claim_owner = $1 AND claim_until >= now()`, deadOwner).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Fatalf("%d claims of the dead process %s still held after the restart", held, deadOwner)
	}
	var docs []tg.MessageKey
	for _, chat := range acct.Sources {
		for _, m := range world.Messages(chat) {
			if m.Document != nil {
				docs = append(docs, m.Key())
			}
		}
	}
	if len(docs) == 0 {
		t.Fatal("nothing published: the test checks nothing")
	}
	// Safety net only: with the claims released the catch-up takes well
	// under a second; held, they would block it for ten minutes.
	deadline := time.Now().Add(time.Minute)
	for _, k := range docs {
		for {
			_, ok, err := st.MessageHandled(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("message %s never caught up after the restart", k)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
