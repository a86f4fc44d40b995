package daemon

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"stashd/internal/pgtest"
	"stashd/listener"
	"stashd/store"
	"stashd/tg"
)

// After a rewind the listener's sources are read again from the rewound
// catalogue: also one it records under another account (a dump older than
// a takeover), by its id; one it does not record at all stays behind, its
// writes refused, and is said once.
func TestReloadAfterARewindReadsEverySourceTheCatalogueRecords(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := store.Open(ctx, store.Config{URL: pgtest.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	own, taken, gone := tg.ChatID(-1001), tg.ChatID(-1002), tg.ChatID(-1003)
	lst := listener.New(listener.Config{Account: "a"}, st, nil)
	for _, s := range []store.Source{{ChatID: own, Account: "a"}, {ChatID: taken, Account: "b"}, {ChatID: gone, Account: "a"}} {
		if err := st.EnsureSource(ctx, s); err != nil {
			t.Fatal(err)
		}
		src, err := st.GetSource(ctx, s.ChatID)
		if err != nil {
			t.Fatal(err)
		}
		lst.Watch(src)
	}
	if _, err := st.CheckIdentity(ctx); err != nil {
		t.Fatal(err)
	}
	// A dump restored in place: its tables have a new OID, and it lacks
	// the newest source.
	if _, err := st.Pool().Exec(ctx, `UPDATE database_identity SET catalogue_oid = catalogue_oid + 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `DELETE FROM sources WHERE chat_id = $1`, int64(gone)); err != nil {
		t.Fatal(err)
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason == "" {
		t.Fatalf("the check: %q, %v; want the restore named", reason, err)
	}
	if behind := lst.Behind(st.Era()); len(behind) != 3 {
		t.Fatalf("sources behind after the rewind: %v, want all three", behind)
	}
	d := &Daemon{store: st, accounts: []*accountRun{{name: "a", lst: lst}}}
	w := &rewindWatch{d: d, log: slog.New(slog.NewTextHandler(io.Discard, nil)), unrecorded: map[tg.ChatID]bool{}}
	w.reloadSources(ctx)
	if behind := lst.Behind(st.Era()); !slices.Equal(behind, []tg.ChatID{gone}) {
		t.Errorf("sources behind after the reload: %v, want only %d, which the catalogue lacks", behind, gone)
	}
	w.reloadSources(ctx)
	if w.firstUnrecorded(gone) {
		t.Errorf("source %d the catalogue lacks was not said unrecorded", gone)
	}
}
