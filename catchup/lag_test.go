package catchup_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/catchup"
	"stashd/listener"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// The chat's last message as getChat shows it is the session's own: TDLib
// answers getChat from its database. These tests hold catch-up to what
// that implies.

// postWhileRead is a session on which a document is posted right after
// getChat answers, its updateChatLastMessage reaching the listener before
// catch-up goes on (its updateNewMessage skipped, as in a busy channel):
// the interleaving of a live channel with a scan.
type postWhileRead struct {
	*tg.Session
	t      *testing.T
	w      *tgsim.World
	lst    *listener.Listener
	posted tg.Message
}

func (p *postWhileRead) GetChat(ctx context.Context, id tg.ChatID) (tg.Chat, error) {
	c, err := p.Session.GetChat(ctx, id)
	if err != nil || p.posted.ID != 0 {
		return c, err
	}
	p.posted = p.w.Post(id, 0, tgsim.Post{FileName: "racing.tar",
		Data: archivetest.Tar([]archivetest.File{{Name: "r", Data: []byte("posted while the chat was read")}})})
	p.lst.HandleUpdate(tg.ChatLastMessage{Chat: id, LastMessageID: p.posted.ID})
	return c, nil
}

// A document posted after getChat answered, whose last-message update
// reached the listener before catch-up compared the two, is not taken for
// handled: the chat as read does not show it, so the source stays dirty
// and the next cycle catalogues it.
func TestMessagePostedWhileTheChatIsReadIsNotSkipped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// The racing document's updateNewMessage is skipped: the session
	// opened the chat, and would otherwise hand it to the listener.
	w := newWorld(t, 1, func(c *tgsim.Config) { c.DropRate = 1 })
	chat := w.sources[0]
	w.post(chat, 0, 2)
	in := w.start()
	w.runOnce(in)
	in.lst.MarkDirty(chat, listener.ReasonConnection)

	race := &postWhileRead{Session: in.sess, t: t, w: w.w, lst: in.lst}
	cu := catchup.New(catchup.Config{Account: "a", Owner: "test", Sources: w.sources,
		Policy: store.ScanPolicy{CircuitBase: time.Hour}}, w.st, race, in.lst, in.pipe, catchup.NewMetrics(prometheus.NewRegistry()))
	if _, err := cu.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if low, _, _ := in.lst.Watermark(chat); low >= race.posted.ID.ServerID() {
		t.Errorf("low watermark %d covers document %d, which nothing handled", low, race.posted.ID.ServerID())
	}
	if !in.lst.IsDirty(chat) {
		t.Errorf("source synced although a document above the chat as read is not handled")
	}
	w.runOnce(in)
	if _, ok, err := w.st.MessageHandled(ctx, race.posted.Key()); err != nil || !ok {
		t.Errorf("document %d posted while the chat was read: handled %v (%v) after the next cycle", race.posted.ID.ServerID(), ok, err)
	}
	if got := w.delivered(); got != 3 {
		t.Errorf("delivered %d of 3 documents", got)
	}
}

// laggingChat is the session of another instance of the account, on its
// own TDLib directory: getChat answers from that directory's database,
// whose last message of a chat is the one it last heard of.
type laggingChat struct {
	*tg.Session
	last map[tg.ChatID]tg.MessageID
}

func (s laggingChat) GetChat(ctx context.Context, id tg.ChatID) (tg.Chat, error) {
	c, err := s.Session.GetChat(ctx, id)
	if l, ok := s.last[id]; ok && err == nil {
		c.LastMessageID = l
	}
	return c, err
}

// An instance saw documents arrive live (its listener stored their ids as
// seen) and stopped before handling them. The next instance's session has
// not heard of them yet: getChat shows the older last message. Catch-up
// does not take the stored ids for deleted: the watermark stays, the
// source stays dirty, and when the session's updates bring the documents
// they are handled.
func TestLaggingSessionDoesNotSkipWhatAnotherInstanceSaw(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newWorld(t, 1)
	chat := w.sources[0]
	in2, watermark, docs := w.lateDocsSeenBeforeStop(t)
	newest := docs[len(docs)-1].ID.ServerID()
	if _, err := in2.catch.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if low, _, _ := in2.lst.Watermark(chat); low != watermark {
		t.Fatalf("low watermark %d, want %d: ids up to %d were never handled", low, watermark, newest)
	}
	if !in2.lst.IsDirty(chat) {
		t.Errorf("source synced over ids it never handled")
	}
	// The session's updates bring the documents; the workers handle them.
	for _, m := range docs {
		seen, err := in2.sess.GetMessage(ctx, chat, m.ID) // as this session sees it
		if err != nil {
			t.Fatal(err)
		}
		in2.lst.HandleUpdate(tg.NewMessage{Message: seen})
	}
	drainQueue(t, in2)
	if _, err := in2.deliver.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.delivered(); got != 5 {
		t.Errorf("delivered %d of 5 documents", got)
	}
}

// A new source (watermark 0) whose last message TDLib reports null
// ("unknown") is paged: an unknown last message is no proof of an empty
// chat.
func TestNewSourceWithUnknownLastMessageIsPaged(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	chat := w.sources[0]
	w.post(chat, 0, 3)
	w.w.SetLastMessageUnknown(chat, true)
	in := w.start()
	res, calls := w.runOnce(in)
	if got := w.delivered(); got != 3 {
		t.Errorf("delivered %d of 3 documents of the new source (result %+v, calls %v)", got, res, calls)
	}
	if in.lst.IsDirty(chat) {
		t.Errorf("source still dirty once paged")
	}
}

// A message the listener saw live (its flush stored it as seen) was
// deleted before catch-up ran, and the daemon restarted on the same TDLib
// directory, whose getChat rightly shows the older last message. The
// stored id is asked about once (getMessage: not found), and the idle
// source is synced: it costs nothing from the next cycle on.
func TestDeletedTailSeenBeforeARestartIsSettledOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	chat := w.sources[0]
	in, gone, low := w.storedSeenBeforeStop(t, 3, tgsim.Post{Text: "soon deleted"})
	w.w.Delete(chat, gone.ID)
	_ = in.c.Close()

	in2 := w.start()
	_, first := w.runOnce(in2)
	if first[tg.MethodGetMessage] != 1 {
		t.Errorf("first cycle after the restart: calls %v, want one getMessage for the stored id", first)
	}
	if in2.lst.IsDirty(chat) {
		t.Errorf("source still dirty once the stored id was found deleted")
	}
	if _, calls := w.runOnce(in2); len(calls) != 0 {
		t.Errorf("idle cycle after that made calls: %v", calls)
	}
	if got, _, _ := in2.lst.Watermark(chat); got != low {
		t.Errorf("low watermark %d, want %d", got, low)
	}
}

// A text message announced while the source was dirty raised the stored
// last seen id above the watermark; the daemon restarted and TDLib reports
// the chat's last message null. Catch-up pages, asks once about the stored
// id (it exists, a text message), and the cycle after settles on the
// session's view: the source does not page for ever.
func TestUnknownLastMessageWithAStoredIdSettles(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	chat := w.sources[0]
	in, _, _ := w.storedSeenBeforeStop(t, 2, tgsim.Post{Text: "just chatter"})
	_ = in.c.Close()
	w.w.SetLastMessageUnknown(chat, true)

	in2 := w.start()
	var calls map[string]int
	for range 2 {
		w.runOnce(in2)
	}
	if in2.lst.IsDirty(chat) {
		t.Errorf("source with nothing new still dirty after two cycles")
	}
	if _, calls = w.runOnce(in2); len(calls) != 0 {
		t.Errorf("third cycle made calls %v: the source pages for ever", calls)
	}
}

// storedSeenBeforeStop runs an instance over n documents of w's first
// source, posts p there, waits until updateChatLastMessage made the
// source dirty, and stores the listener's state as its flush would before
// a stop: p's id as last seen, above the low watermark. It returns the
// instance, p as posted and the low watermark.
func (w *world) storedSeenBeforeStop(t *testing.T, n int, p tgsim.Post) (*instance, tg.Message, int64) {
	t.Helper()
	chat := w.sources[0]
	w.post(chat, 0, n)
	in := w.start()
	w.runOnce(in)
	drain(in.lst.Wake())
	posted := w.w.Post(chat, 0, p)
	select {
	case <-in.lst.Wake(): // updateChatLastMessage made it dirty
	case <-time.After(10 * time.Second):
		t.Fatal("the source never became dirty")
	}
	low, lastSeen, _ := in.lst.Watermark(chat)
	if lastSeen != posted.ID.ServerID() || low >= lastSeen {
		t.Fatalf("low %d, last seen %d; want last seen %d above the low watermark", low, lastSeen, posted.ID.ServerID())
	}
	if err := w.st.SaveSourceState(t.Context(), chat, true, listener.ReasonLastMessage, low, lastSeen); err != nil {
		t.Fatal(err)
	}
	return in, posted, low
}

// lateDocsSeenBeforeStop runs an instance over three documents of w's
// first source, then posts two more that its listener saw and stored as
// seen before it stopped, unhandled. It returns a second instance, on a
// TDLib directory of its own whose getChat still shows the last message
// handled (laggingChat), the watermark, and the two documents.
func (w *world) lateDocsSeenBeforeStop(t *testing.T) (*instance, int64, []tg.Message) {
	t.Helper()
	ctx := t.Context()
	chat := w.sources[0]
	w.post(chat, 0, 3)
	w.runOnce(w.start())
	src, err := w.st.GetSource(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	var docs []tg.Message
	for i := range 2 {
		docs = append(docs, w.w.Post(chat, 0, tgsim.Post{FileName: "late.tar",
			Data: archivetest.Tar([]archivetest.File{{Name: "l", Data: []byte{byte(i)}}})}))
	}
	newest := docs[len(docs)-1].ID.ServerID()
	if err := w.st.SaveSourceState(ctx, chat, true, listener.ReasonGap, src.Watermark, newest); err != nil {
		t.Fatal(err)
	}
	return w.startWith("instance-2", map[tg.ChatID]tg.MessageID{chat: tg.MessageIDFromServer(src.Watermark)}), src.Watermark, docs
}
