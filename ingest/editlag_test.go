package ingest_test

import (
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
)

// TDLib answers getMessage with a 404 for a channel message newer than
// the last one the session learned through updates, and fetches the
// chat's difference instead (MessagesManager::add_message_to_dialog, "too
// new message not from update"). An instance started on a directory that
// did not follow the source while another instance ran reads the messages
// that instance handled as missing until the difference is in: the
// re-fetch of a change that instance noted must not take that 404 for a
// deletion and forget the change.
func TestNotedEditOfAMessageTheSessionDoesNotKnowYet(t *testing.T) {
	t.Parallel()
	// The second instance ran before and looked at the source.
	e := sourceSeenByInstance2(t)
	src := e.src["a"]

	// The first instance handles a text message, which an edit then turns
	// into a tar; it notes the change and stops before fetching it.
	p1, c1 := e.pipeline("a")
	text := e.view(c1, e.world.Post(src, 0, tgsim.Post{Text: "soon a tar"}))
	mustHandle(t, p1, text, store.OutcomeNotArchive)
	if err := e.st.AdvanceWatermark(e.ctx, src, text.ID.ServerID()); err != nil {
		t.Fatal(err)
	}
	e.world.EditIntoDocument(src, text.ID, tgsim.Post{FileName: "edited.tar",
		Data: archivetest.Tar([]archivetest.File{{Name: "edited.txt", Data: []byte("edited")}})})
	if err := e.st.NoteEdits(e.ctx, "a", []store.PendingEdit{{Key: text.Key(), Seq: 1}}); err != nil {
		t.Fatal(err)
	}

	// The second instance starts on its directory: it opens its source,
	// as the daemon does, and its listener queues the noted re-fetch.
	p2, c2 := e.pipelineIn("a", "instance-2")
	if err := c2.OpenChat(e.ctx, src); err != nil {
		t.Fatal(err)
	}
	lst := startListener(t, e, src)
	pool := ingest.NewPool(ingest.PoolConfig{Account: "a", Workers: 1}, lst, p2, nil)
	if err := pool.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	defer pool.Stop()
	retry := ingest.NewRetrier(ingest.RetryConfig{}, p2, e.st, nil)
	deadline := time.Now().Add(8 * time.Second)
	for {
		if _, err := retry.RunOnce(e.ctx); err != nil {
			t.Fatal(err)
		}
		out, ok, err := e.st.MessageHandled(e.ctx, text.Key())
		if err == nil && ok && out == store.OutcomePackage {
			return
		}
		if time.Now().After(deadline) {
			var notes int
			_ = e.st.Pool().QueryRow(e.ctx, `SELECT count(*) FROM pending_edits`).Scan(&notes)
			t.Fatalf("the edited message is %q (%v, %v) after the restart, %d notes left; want it catalogued", out, ok, err, notes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
