package rescan_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/rescan"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// The start of a rescan's window may be the session's own message whose
// send failed there (a source that is also a destination): TDLib answers
// getChatMessageByDate from the chat's last message when it is not newer
// than the date. The window then starts after the server message that
// failed message followed, not at the chat's beginning.
func TestRescanWindowStartsAtAFailedSendsServerMessage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var offset atomic.Int64 // the world's clock, relative to now
	f := newFixture(t, tgsim.Config{Seed: 9, Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }},
		tg.KindChannel, "both")
	w, both := f.w, f.src
	feed := w.AddChat(tg.KindChannel, "feed", "a")
	offset.Store(int64(-5 * 24 * time.Hour))
	w.Post(both, 0, tgsim.Post{FileName: "outside.tar", Data: archivetest.Tar([]archivetest.File{{Name: "o", Data: []byte("o")}})})
	doc := w.Post(feed, 0, tgsim.Post{FileName: "f.tar", Data: archivetest.Tar([]archivetest.File{{Name: "f", Data: []byte("f")}})})
	offset.Store(int64(-4 * 24 * time.Hour))
	w.Post(both, 0, tgsim.Post{Text: "before the failed send"})

	c, sess := f.session(t)
	m, err := sess.GetMessage(ctx, feed, doc.ID)
	if err != nil {
		t.Fatal(err)
	}
	w.InjectSendFailures("a", true)
	if _, err := c.SendDocument(ctx, both, m.Document.File.RemoteID, "x"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(c.FailedMessages(both)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the send did not fail")
		}
	}
	offset.Store(0)

	_, r := f.rescanner(sess, rescan.Config{Window: 3 * 24 * time.Hour}, rescan.NewMetrics(prometheus.NewRegistry()))
	res, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Found != 0 {
		t.Errorf("rescan = %+v; want nothing found: the only document is older than the window", res)
	}
}
