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

// fixture is a rescan test's catalogue and world: account "a" with the
// destination channel "mirror" and one source, recorded in the catalogue.
type fixture struct {
	st        *store.Store
	w         *tgsim.World
	dest, src tg.ChatID
}

// newFixture opens a catalogue on a database of its own and a world of cfg
// (its files in a temporary directory) where account "a" has the
// destination and a source of kind named title.
func newFixture(t *testing.T, cfg tgsim.Config, kind tg.ChatKind, title string) fixture {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	cfg.FilesDir = t.TempDir()
	w := tgsim.NewWorld(cfg)
	w.AddAccount("a", false)
	f := fixture{st: st, w: w, dest: w.AddChat(tg.KindChannel, "mirror", "a"), src: w.AddChat(kind, title, "a")}
	if err := st.EnsureSource(t.Context(), store.Source{ChatID: f.src, Account: "a"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// session starts a client and session of account "a", its chats loaded.
func (f fixture) session(t *testing.T) (*tgsim.Client, *tg.Session) {
	t.Helper()
	c := f.w.Client("a")
	t.Cleanup(func() { c.Close() })
	sess := tg.NewSession(c, func(tg.Update) {})
	if err := sess.LoadChats(t.Context()); err != nil {
		t.Fatal(err)
	}
	return c, sess
}

// rescanner returns the pipeline to the destination and a rescan of the
// source for account "a" with cfg's other settings.
func (f fixture) rescanner(sess *tg.Session, cfg rescan.Config, m *rescan.Metrics) (*ingest.Pipeline, *rescan.Rescan) {
	p := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{f.dest}}, f.st, sess, nil)
	cfg.Account, cfg.Sources = "a", []tg.ChatID{f.src}
	return p, rescan.New(cfg, sess, f.st, p, m)
}

// A document edited into an old message, below the watermark, is invisible
// to the live stream's continuity and to catch-up; the rescan finds it.
func TestRescanFindsDocumentEditedIntoOldMessage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, tgsim.Config{Seed: 5}, tg.KindSupergroup, "group")
	st, w, dest, src := f.st, f.w, f.dest, f.src
	old := w.Post(src, 0, tgsim.Post{Text: "archive coming soon"})
	_, sess := f.session(t)
	m := rescan.NewMetrics(prometheus.NewRegistry())
	p, r := f.rescanner(sess, rescan.Config{}, m)

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
