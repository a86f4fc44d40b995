package rescan_test

import (
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/internal/pgtest"
	"stashd/rescan"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// A document edited into an old message, below the watermark, is invisible
// to the live stream's continuity and to catch-up; the rescan finds it.
func TestRescanFindsDocumentEditedIntoOldMessage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := store.Open(ctx, store.Config{URL: pgtest.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	dest := w.AddChat(tg.KindChannel, "mirror", "a")
	src := w.AddChat(tg.KindSupergroup, "group", "a")
	if err := st.EnsureSource(ctx, store.Source{ChatID: src, Account: "a"}); err != nil {
		t.Fatal(err)
	}
	old := w.Post(src, 0, tgsim.Post{Text: "archive coming soon"})
	c := w.Client("a")
	defer c.Close()
	sess := tg.NewSession(c, func(tg.Update) {})
	if err := sess.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	p := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{dest}}, st, sess, nil)
	m := rescan.NewMetrics(prometheus.NewRegistry())
	r := rescan.New(rescan.Config{Account: "a", Sources: []tg.ChatID{src}}, sess, st, p, m)

	// The chat is synced past the old message; then a document is edited in.
	if err := st.SaveSourceState(ctx, src, false, "", old.ID.ServerID(), old.ID.ServerID()); err != nil {
		t.Fatal(err)
	}
	w.EditIntoDocument(src, old.ID, tgsim.Post{FileName: "late.tar",
		Data: archivetest.Tar([]archivetest.File{{Name: "x", Data: []byte("edited in")}})})

	res, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Found != 1 {
		t.Fatalf("rescan = %+v, want the edited-in document found", res)
	}
	if got := testutil.ToFloat64(m.Found()); got != 1 {
		t.Errorf("stashd_rescan_items_found_total = %v, want 1", got)
	}
	if out, ok, err := st.MessageHandled(ctx, old.Key()); err != nil || !ok || out != store.OutcomePackage {
		t.Errorf("edited message handled = %v %q %v, want a package", ok, out, err)
	}
	if _, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, st, nil).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	delivered := 0
	for _, m := range w.Messages(dest) {
		if m.Document != nil {
			delivered++
		}
	}
	if delivered != 1 {
		t.Errorf("delivered %d, want 1", delivered)
	}
	if last := testutil.ToFloat64(m.LastRun()); time.Since(time.Unix(int64(last), 0)) > time.Minute {
		t.Errorf("last run timestamp %v not set", last)
	}

	// A second rescan finds nothing new and costs no ingest.
	res, err = r.RunOnce(ctx)
	if err != nil || res.Found != 0 || res.Scanned != 1 {
		t.Errorf("second rescan = %+v, %v; want 1 scanned, 0 found", res, err)
	}
}
