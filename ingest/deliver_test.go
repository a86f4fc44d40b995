package ingest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// crashMidSend runs posted through a pipeline whose process dies right
// after sendMessage, and returns once the send has landed in the
// destination (as TDLib lands it without telling anyone).
func crashMidSend(t *testing.T, e *env, posted tg.Message) {
	t.Helper()
	before := len(e.delivered())
	c1 := e.world.Client("a")
	if err := c1.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	s1 := tg.NewSession(c1, func(tg.Update) {})
	m1, err := c1.GetMessage(e.ctx, posted.ChatID, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	crashDelivering(t, e, s1, c1, m1)
	<-s1.Done()
	if got := len(e.delivered()); got != before+1 {
		t.Fatalf("destination holds %d documents after the crashed send, want %d", got, before+1)
	}
}

// Telegram's full-text search is word-based and indexes late: a token sent
// just before a crash is not found by searching for it. Reconciliation
// pages the destination's recent documents instead (here past a full page
// of later documents) and matches captions itself, so nothing is sent twice.
func TestReconcileDoesNotRelyOnServerSearch(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1, SearchIndexLag: time.Hour}, "a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "lag.tar", Data: archivetest.Tar([]archivetest.File{{Name: "l", Data: []byte("l")}})})
	crashMidSend(t, e, posted)
	// Other deliveries land after it, more than one page of them.
	for i := range tg.MaxSearchLimit + 20 {
		e.world.Post(e.dest, 0, tgsim.Post{FileName: "other.zip", Data: []byte{byte(i)}, Caption: "other.zip\n" + ingest.TokenPrefix + "ffff"})
	}

	p2, c2 := e.pipeline("a")
	mustHandle(t, p2, e.view(c2, posted), store.OutcomeDuplicate)
	e.deliver()
	copies := 0
	for _, m := range e.delivered() {
		if m.Document.File.UniqueID == posted.Document.File.UniqueID {
			copies++
		}
	}
	if copies != 1 {
		t.Fatalf("destination holds %d copies after reconciliation, want 1", copies)
	}
	if sends := e.world.Calls("a")[tg.MethodSendMessage]; sends != 1 {
		t.Errorf("%d sendMessage calls, want 1 (the crashed one)", sends)
	}
}

// After a restart TDLib finishes the previous session's pending send by
// itself and reports it to the new session under a temporary id that
// session never issued. The delivery is recorded by the token in the
// caption; handling the message again sends nothing and needs no search.
func TestSendOfEarlierSessionRecordedByToken(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1, ResendAfterRestart: true}, "a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "resent.tar", Data: archivetest.Tar([]archivetest.File{{Name: "r", Data: []byte("r")}})})
	e.world.HoldSends(true)

	crashOn(t, e, e.world.Client("a"), posted)
	if n := len(e.delivered()); n != 0 {
		t.Fatalf("the pending send landed before a client restarted: %d documents", n)
	}

	// The restarted client re-sends it; its session hands the outcome over.
	e.world.HoldSends(false)
	unclaimed := make(chan tg.Message, 4)
	c2 := e.world.Client("a")
	t.Cleanup(func() { _ = c2.Close() })
	s2 := tg.NewSession(c2, func(u tg.Update) {
		if ok, is := u.(tg.SendSucceeded); is {
			unclaimed <- ok.Message
		}
	})
	if err := c2.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	p2 := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{e.dest}}, e.st, s2, nil)
	var m tg.Message
	select {
	case m = <-unclaimed:
	case <-time.After(10 * time.Second):
		t.Fatal("the re-sent outcome never reached the session's handler")
	}
	if ok, err := p2.RecordSend(e.ctx, m); err != nil || !ok {
		t.Fatalf("RecordSend = %v, %v; want the intent recorded", ok, err)
	}
	if ok, err := p2.RecordSend(e.ctx, m); err != nil || ok {
		t.Fatalf("second RecordSend = %v, %v; want nothing to record", ok, err)
	}
	counts, err := e.st.DeliveryCounts(e.ctx)
	if err != nil || counts[store.DeliverySent] != 1 || counts[store.DeliveryIntent] != 0 {
		t.Fatalf("deliveries = %v, %v; want the one intent sent", counts, err)
	}

	// The package is catalogued and fully delivered: the source message
	// links to it without any call to the destination.
	mustHandle(t, p2, e.view(c2, posted), store.OutcomeDuplicate)
	if n := len(e.delivered()); n != 1 {
		t.Fatalf("destination holds %d copies, want 1", n)
	}
	calls := e.world.Calls("a")
	if calls[tg.MethodSendMessage] != 1 || calls[tg.MethodSearchChatMessages] != 0 {
		t.Errorf("sendMessage %d, searchChatMessages %d; want 1 and 0", calls[tg.MethodSendMessage], calls[tg.MethodSearchChatMessages])
	}
}

// A send that TDLib deletes instead of sending ends the attempt with a
// retryable error naming it, instead of waiting for ever.
func TestVanishedSendFailsTheAttempt(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1, SendVanishRate: 1}, "a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "v.tar", Data: archivetest.Tar([]archivetest.File{{Name: "v", Data: []byte("v")}})})
	p, c := e.pipeline("a")
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	// A retryable failure defers the delivery; a permanent one would give
	// it up.
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(e.ctx)
	if err != nil || res.Deferred != 1 || res.Failed != 0 {
		t.Fatalf("delivery = %+v, %v; want it deferred as retryable", res, err)
	}
	queued, err := e.st.DueWaiting(e.ctx, "a", e.now.Add(time.Hour), 10)
	if err != nil || len(queued) != 1 {
		t.Fatalf("queue = %+v, %v; want the delivery waiting", queued, err)
	}
	if why := queued[0].LastError; !strings.Contains(why, tg.ErrSendVanished.Error()) || !strings.Contains(why, "deleted") {
		t.Errorf("error %q does not say the send was deleted", why)
	}
}

// A destination held (a reconciliation pending) does not keep the
// deliveries queued behind it to other destinations from going out, even
// when a whole batch of its own comes first.
func TestHeldDestinationDoesNotHoldOthersBehindIt(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 41}, "a")
	d2 := e.world.AddChat(tg.KindChannel, "mirror two", "a")
	// Two packages queued to the held destination first, then one to d2.
	p1, c1, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Destinations = []tg.ChatID{e.dest} }, nil)
	for _, name := range []string{"h1", "h2"} {
		posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name + ".7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "h", Data: []byte(name)}})})
		mustHandle(t, p1, e.view(c1, posted), store.OutcomePackage)
	}
	p2, c2, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Destinations = []tg.ChatID{d2} }, nil)
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "other.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "o", Data: []byte("other")}})})
	mustHandle(t, p2, e.view(c2, posted), store.OutcomePackage)

	p, _, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Destinations = []tg.ChatID{e.dest, d2} }, nil)
	hold := func(_ context.Context, dest tg.ChatID, _ bool, _ int64) (bool, error) { return dest == e.dest, nil }
	d := ingest.NewDeliverer(ingest.DeliveryConfig{Hold: hold, Batch: 2}, p, e.st, nil)
	for range 3 { // three looks of the stage
		if _, err := d.RunOnce(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.world.Messages(d2)); n != 1 {
		t.Fatalf("destination two holds %d messages after three runs; want its delivery sent (only the first destination is held)", n)
	}
}
