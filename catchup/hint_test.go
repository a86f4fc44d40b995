package catchup_test

import (
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/listener"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// deletedHintOverLiveDocuments: instance 1 saw two documents and then a
// text message arrive, stored the text's id as last seen and stopped
// before handling the documents. The text message is then deleted.
// Instance 2 runs on its own directory, whose database last looked at the
// chat before the documents were posted (its getChat lags until the
// session opens the chat or hears of a new message; here it has not
// opened it). The stored id is gone, but the ids below it are not: the
// source must not be synced over them.
func deletedHintOverLiveDocuments(t *testing.T, kind tg.ChatKind) (*world, *instance, tg.ChatID, []tg.Message, int64) {
	ctx := t.Context()
	w := newWorld(t, 0)
	chat := w.addSource(kind, "source")
	w.post(chat, 0, 2)
	in := w.start()
	w.runOnce(in)
	if in.lst.IsDirty(chat) {
		t.Fatal("setup: source dirty after the first cycle")
	}
	src, err := w.st.GetSource(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	// Instance 2's directory has looked at the chat (an earlier run).
	c2 := w.w.ClientIn("a", "instance-2")
	if _, err := c2.GetChats(ctx, false, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.GetChat(ctx, chat); err != nil {
		t.Fatal(err)
	}
	_ = c2.Close()

	var docs []tg.Message
	for i := range 2 {
		docs = append(docs, w.w.Post(chat, 0, tgsim.Post{FileName: "late.tar",
			Data: archivetest.Tar([]archivetest.File{{Name: "l", Data: []byte{byte(i), 'x'}}})}))
	}
	gone := w.w.Post(chat, 0, tgsim.Post{Text: "soon deleted"})
	// Instance 1's listener stored what it saw, then the process died.
	low, lastSeen, _ := in.lst.Watermark(chat)
	for deadline := time.Now().Add(10 * time.Second); lastSeen != gone.ID.ServerID() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		low, lastSeen, _ = in.lst.Watermark(chat)
	}
	if lastSeen != gone.ID.ServerID() || low != src.Watermark {
		t.Fatalf("setup: low %d last seen %d, want %d %d", low, lastSeen, src.Watermark, gone.ID.ServerID())
	}
	if err := w.st.SaveSourceState(ctx, chat, true, listener.ReasonLastMessage, low, lastSeen); err != nil {
		t.Fatal(err)
	}
	_ = in.c.Close()
	w.w.Delete(chat, gone.ID)

	in2 := w.startIn("instance-2")
	return w, in2, chat, docs, src.Watermark
}

// Channel: the walk down from the stored id finds the newest document, the
// session learns of it, and the next cycle pages both documents; then the
// source is synced and idle.
func TestDeletedStoredIdDoesNotSyncOverDocumentsBelowIt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w, in2, chat, docs, _ := deletedHintOverLiveDocuments(t, tg.KindChannel)
	// The walk's getMessage of an id newer than the session's last message
	// makes TDLib fetch the chat's difference, whose new messages reach
	// the listener as updates: the workers handle those.
	for range 3 {
		w.runOnce(in2)
		drainQueue(t, in2)
	}
	for _, d := range docs {
		if _, ok, err := w.st.MessageHandled(ctx, d.Key()); err != nil || !ok && !in2.lst.IsDirty(chat) {
			t.Errorf("source synced, yet document %d above the watermark is not handled (%v)", d.ID.ServerID(), err)
		}
	}
	for _, d := range docs {
		if _, ok, err := w.st.MessageHandled(ctx, d.Key()); err != nil || !ok {
			t.Errorf("document %d above the watermark not handled after 3 cycles (%v)", d.ID.ServerID(), err)
		}
	}
	if in2.lst.IsDirty(chat) {
		t.Errorf("source still dirty once the documents were handled and the ids above them found gone")
	}
	if _, calls := w.runOnce(in2); len(calls) != 0 {
		t.Errorf("idle cycle after that made calls: %v", calls)
	}
}

// Basic group (its ids are no per-chat sequence, so a live message moves
// the watermark over what is below it): the documents are handled before
// the next live message moves the watermark.
func TestDeletedStoredIdInABasicGroupKeepsTheWatermark(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w, in2, chat, docs, _ := deletedHintOverLiveDocuments(t, tg.KindBasicGroup)
	w.runOnce(in2)
	next := w.w.Post(chat, 0, tgsim.Post{FileName: "next.tar",
		Data: archivetest.Tar([]archivetest.File{{Name: "n", Data: []byte("next")}})})
	deadline := time.Now().Add(10 * time.Second)
	for {
		drainQueue(t, in2)
		if low, _, _ := in2.lst.Watermark(chat); low >= next.ID.ServerID() || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.runOnce(in2)
	low, _, _ := in2.lst.Watermark(chat)
	for _, d := range docs {
		if _, ok, err := w.st.MessageHandled(ctx, d.Key()); err != nil || !ok {
			t.Errorf("document %d: handled %v (%v), yet the low watermark is %d and the source dirty=%v", d.ID.ServerID(), ok, err, low, in2.lst.IsDirty(chat))
		}
	}
}

// A lagging session (laggingChat, whose getChat keeps showing the older
// last message until its updates arrive): the stored id exists, getMessage
// finds it, and the source stays dirty at every cycle until the session's
// view shows it, however many cycles come first.
func TestStoredIdFoundKeepsTheSourceDirtyWhileTheViewLags(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t, 1)
	chat := w.sources[0]
	in2, _, docs := w.lateDocsSeenBeforeStop(t)
	for cycle := range 2 {
		if _, err := in2.catch.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if _, ok, err := w.st.MessageHandled(ctx, d.Key()); err != nil || !ok && !in2.lst.IsDirty(chat) {
				t.Errorf("cycle %d: source synced, yet document %d above the watermark is not handled (%v)", cycle+1, d.ID.ServerID(), err)
			}
		}
	}
}
