package rescan_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/rescan"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// A document replaced by an edit while no session listened (no
// updateMessageContent reached stashd) keeps its message id; the rescan
// sees the new file unique id and the new document is mirrored.
func TestRescanFindsReplacedDocument(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, tgsim.Config{Seed: 6}, tg.KindChannel, "releases")
	st, w, dest, src := f.st, f.w, f.dest, f.src
	posted := w.Post(src, 0, tgsim.Post{FileName: "v1.tar", Data: archivetest.Tar([]archivetest.File{{Name: "x", Data: []byte("v1")}})})
	_, sess := f.session(t)
	p, r := f.rescanner(sess, rescan.Config{}, rescan.NewMetrics(prometheus.NewRegistry()))
	first, err := sess.GetMessage(ctx, src, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := p.Process(ctx, first); err != nil || out != store.OutcomePackage {
		t.Fatalf("process = %q, %v", out, err)
	}

	edit := w.EditMessageMedia(src, posted.ID, tgsim.Post{FileName: "v2.tar", Data: archivetest.Tar([]archivetest.File{{Name: "x", Data: []byte("v2")}})})
	res, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Found != 1 {
		t.Fatalf("rescan = %+v, want the replaced document found", res)
	}
	if _, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, st, nil).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, m := range w.Messages(dest) {
		if m.Document != nil {
			files = append(files, m.Document.File.UniqueID)
		}
	}
	// The first document was not delivered before the edit took it out
	// of the message, and no message carries it any more: Telegram refuses
	// to send it (FILE_REFERENCE_INVALID), and only its replacement
	// reaches the destination, never under the first package's record.
	if len(files) != 1 || files[0] != edit.NewUniqueID {
		t.Fatalf("destination files = %v; want only the replacement %s", files, edit.NewUniqueID)
	}
	if backlog, err := st.DeliveryBacklog(ctx); err != nil || len(backlog) != 0 {
		t.Fatalf("deliveries still queued: %+v, %v; want the first package's given up", backlog, err)
	}
	// A second rescan finds nothing: the replacement is recorded.
	if res, err := r.RunOnce(ctx); err != nil || res.Found != 0 {
		t.Fatalf("second rescan = %+v, %v; want nothing found", res, err)
	}
}
