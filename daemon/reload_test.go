package daemon

import (
	"testing"

	"stashd/listener"
	"stashd/store"
	"stashd/tg"
)

// After a rewind the listener's sources are read again from the rewound
// catalogue: also one it records under another account (a dump older than
// a takeover), by its id. (One it does not record at all is registered
// again: TestSourceTheRestoredDumpLacksIsRegisteredAgain.)
func TestReloadAfterARewindReadsEverySourceTheCatalogueRecords(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openChecked(t)
	own, taken := tg.ChatID(-1001), tg.ChatID(-1002)
	lst := listener.New(listener.Config{Account: "a"}, st, nil)
	for _, s := range []store.Source{{ChatID: own, Account: "a"}, {ChatID: taken, Account: "b"}} {
		if err := st.EnsureSource(ctx, s); err != nil {
			t.Fatal(err)
		}
		src, err := st.GetSource(ctx, s.ChatID)
		if err != nil {
			t.Fatal(err)
		}
		lst.Watch(src)
	}
	restoreInPlace(t, st)
	if reason, err := st.CheckIdentity(ctx); err != nil || reason == "" {
		t.Fatalf("the check: %q, %v; want the restore named", reason, err)
	}
	if behind := lst.Behind(st.Era()); len(behind) != 2 {
		t.Fatalf("sources behind after the rewind: %v, want both", behind)
	}
	d := &Daemon{store: st, accounts: []*accountRun{{name: "a", lst: lst}}}
	w := quietWatch(d)
	w.reloadSources(ctx)
	if behind := lst.Behind(st.Era()); len(behind) != 0 {
		t.Errorf("sources behind after the reload: %v, want none", behind)
	}
}
