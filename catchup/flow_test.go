package catchup_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"stashd/catchup"
	"stashd/ingest"
	"stashd/store"
	"stashd/tg"
)

// holdFirst is the pipeline, holding the message first back until every
// other message it was given has been handled, or until a deadline.
type holdFirst struct {
	*ingest.Pipeline
	first   tg.MessageID
	others  int // how many other messages the source holds
	handled atomic.Int64
	all     chan struct{}
	// seen is run while first is held, once the others are handled.
	seen func()
	// late is how many others were handled when the deadline came.
	late int64
}

func (h *holdFirst) Process(ctx context.Context, msg tg.Message) (store.Outcome, error) {
	if msg.ID != h.first {
		out, err := h.Pipeline.Process(ctx, msg)
		if h.handled.Add(1) == int64(h.others) {
			close(h.all)
		}
		return out, err
	}
	select {
	case <-h.all:
		h.seen()
	case <-time.After(5 * time.Second):
		h.late = h.handled.Load()
	}
	return h.Pipeline.Process(ctx, msg)
}

// The next page's messages start while a message of the page before is
// still in flight, so that a page's end is no pause; the watermark still
// moves only past pages handled whole, in order.
func TestPagesOverlapAndCheckpointInOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	src := w.sources[0]
	w.post(src, 0, 12) // three pages of four documents
	docs := w.documents(src)
	in := w.start()
	before, err := w.st.GetSource(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	held := &holdFirst{Pipeline: in.pipe, first: docs[0].ID, others: len(docs) - 1, all: make(chan struct{})}
	var overlapped bool
	held.seen = func() {
		overlapped = true
		s, err := w.st.GetSource(t.Context(), src)
		if err != nil {
			t.Error(err)
			return
		}
		if s.Watermark != before.Watermark {
			t.Errorf("watermark %d while the first page's first message was in flight, want %d as before the scan", s.Watermark, before.Watermark)
		}
	}
	cu := catchup.New(catchup.Config{Account: "a", Owner: "test", Sources: w.sources, PageSize: 4, Parallel: 4}, w.st, in.sess, in.lst, held, nil)
	res, err := cu.RunOnce(t.Context())
	if err != nil || res.Messages != len(docs) {
		t.Fatalf("catch-up: %+v, %v; want %d documents handed to ingest", res, err, len(docs))
	}
	if !overlapped {
		t.Errorf("%d of the other %d documents handled in the 5 s the first page's first was in flight, want all: the pages after it waited for it", held.late, len(docs)-1)
	}
	s, err := w.st.GetSource(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	all := w.w.Messages(src)
	if want := all[len(all)-1].ID.ServerID(); s.Watermark != want {
		t.Errorf("watermark %d after the scan, want the last message %d", s.Watermark, want)
	}
}

// failOnce is the pipeline, failing its first attempt at one message.
type failOnce struct {
	*ingest.Pipeline
	bad    tg.MessageID
	failed atomic.Bool
}

func (f *failOnce) Process(ctx context.Context, msg tg.Message) (store.Outcome, error) {
	if msg.ID == f.bad && f.failed.CompareAndSwap(false, true) {
		return "", errors.New("ingest refused the message")
	}
	return f.Pipeline.Process(ctx, msg)
}

// A message that fails keeps the watermark below it, whatever the pages
// after its own did; the next cycle reads from there and completes.
func TestFailedMessageHoldsTheWatermarkBelowIt(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	src := w.sources[0]
	w.post(src, 0, 12) // three pages of four documents
	docs := w.documents(src)
	in := w.start()
	bad := docs[9] // in the last page
	f := &failOnce{Pipeline: in.pipe, bad: bad.ID}
	cu := catchup.New(catchup.Config{Account: "a", Owner: "test", Sources: w.sources, PageSize: 4, Parallel: 4,
		Policy: store.ScanPolicy{RetryDelay: time.Millisecond}}, w.st, in.sess, in.lst, f, nil)
	if _, err := cu.RunOnce(t.Context()); err == nil || !strings.Contains(err.Error(), "ingest refused the message") {
		t.Fatalf("catch-up with a message failing: %v, want its failure", err)
	}
	s, err := w.st.GetSource(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	if s.Watermark >= bad.ID.ServerID() {
		t.Errorf("watermark %d after message %d failed, want below it", s.Watermark, bad.ID.ServerID())
	}
	if !in.lst.IsDirty(src) {
		t.Error("source not dirty after a message of its scan failed")
	}
	res, err := cu.RunOnce(t.Context())
	if err != nil || res.Paged != 1 {
		t.Fatalf("second catch-up: %+v, %v; want the source paged", res, err)
	}
	if _, err := in.deliver.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := w.delivered(); got != len(docs) {
		t.Errorf("delivered %d, want %d", got, len(docs))
	}
	s, err = w.st.GetSource(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	all := w.w.Messages(src)
	if want := all[len(all)-1].ID.ServerID(); s.Watermark != want {
		t.Errorf("watermark %d after the second scan, want the last message %d", s.Watermark, want)
	}
}

// A scan that keeps failing with a 406 (which TDLib asks to be dropped
// silently, and which backs nothing off) leaves its source dirty for the
// next cycle without waking the loop at once: the loop does not spin on
// it.
func TestRecurringIgnoredErrorDoesNotSpinTheLoop(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	w.post(w.sources[0], 0, 2)
	in := w.start()
	w.w.InjectError("a", tg.MethodSearchChatMessages, &tg.Error{Code: 406, Message: "CHANNEL_TOO_LARGE"}, 1000)
	w.w.ResetCalls()
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond) // under the 2 s interval
	defer cancel()
	if err := in.catch.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	in.catch.Stop()
	// The first cycle, and one more for the start's own wake.
	switch got := w.w.Calls("a")[tg.MethodSearchChatMessages]; {
	case got == 0:
		t.Error("no search in 1.5 s: the loop never scanned the source")
	case got > 3:
		t.Errorf("%d searches in 1.5 s of a source failing with a 406, want at most 3: the loop spins", got)
	}
	if !in.lst.IsDirty(w.sources[0]) {
		t.Error("source not dirty after its scans failed")
	}
}

// documents returns the messages of chat that carry a document, oldest
// first.
func (w *world) documents(chat tg.ChatID) []tg.Message {
	var docs []tg.Message
	for _, m := range w.w.Messages(chat) {
		if m.Document != nil {
			docs = append(docs, m)
		}
	}
	return docs
}

// failingWatermark is the store, failing its first watermark write.
type failingWatermark struct {
	*store.Store
	failed atomic.Bool
}

func (f *failingWatermark) AdvanceWatermark(ctx context.Context, chat tg.ChatID, w int64) error {
	if f.failed.CompareAndSwap(false, true) {
		return errors.New("watermark write refused")
	}
	return f.Store.AdvanceWatermark(ctx, chat, w)
}

// slowIngest is the pipeline, each message taking a while, counting the
// messages in its hands.
type slowIngest struct {
	*ingest.Pipeline
	inFlight atomic.Int64
	handed   atomic.Int64 // every message handed over
}

func (s *slowIngest) Process(ctx context.Context, msg tg.Message) (store.Outcome, error) {
	s.handed.Add(1)
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	time.Sleep(50 * time.Millisecond)
	return s.Pipeline.Process(ctx, msg)
}

// A scan whose watermark write fails ends only once the messages it
// handed over are done with: none is left in flight behind it, holding
// its prelocks.
func TestFailedCheckpointWaitsForTheMessagesInFlight(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	w.post(w.sources[0], 0, 8) // two pages of four documents
	in := w.start()
	slow := &slowIngest{Pipeline: in.pipe}
	cu := catchup.New(catchup.Config{Account: "a", Owner: "test", Sources: w.sources, PageSize: 4, Parallel: 4},
		&failingWatermark{Store: w.st}, in.sess, in.lst, slow, nil)
	_, err := cu.RunOnce(t.Context())
	if slow.handed.Load() == 0 {
		t.Fatal("no message handed over: the scan never had any in flight")
	}
	if n := slow.inFlight.Load(); n != 0 {
		t.Errorf("%d messages still in flight when the scan ended", n)
	}
	if err == nil || !strings.Contains(err.Error(), "watermark write refused") {
		t.Errorf("catch-up: %v, want the watermark write's failure", err)
	}
}
