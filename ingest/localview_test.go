package ingest_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// pipelineIn is pipeline on a fresh client of account on the TDLib
// database directory dir (another instance's login of the account).
func (e *env) pipelineIn(account, dir string) (*ingest.Pipeline, *tgsim.Client) {
	e.t.Helper()
	return e.pipelineInWith(account, dir, nil)
}

// pipelineInWith is pipelineIn with the configuration changed by mod (when
// not nil), given the session.
func (e *env) pipelineInWith(account, dir string, mod func(*ingest.Config, *tg.Session)) (*ingest.Pipeline, *tgsim.Client) {
	e.t.Helper()
	c := e.world.ClientIn(account, dir)
	e.t.Cleanup(func() { _ = c.Close() })
	if err := c.LoadChats(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	sess := tg.NewSession(c, func(tg.Update) {})
	cfg := ingest.Config{
		Account: account, Destinations: []tg.ChatID{e.dest},
		SetSettle: time.Minute, SetMaxWait: time.Hour, RetryBase: time.Millisecond,
		Now: func() time.Time { return e.now },
	}
	if mod != nil {
		mod(&cfg, sess)
	}
	p := ingest.NewPipeline(cfg, e.st, sess, ingest.NewMetrics(prometheus.NewRegistry()))
	e.pipes = append(e.pipes, p)
	return p, c
}

// wantOneCopyTakenOver has p2 (on c2, another instance's) take over the
// delivery of posted, whose send crashed, and wants the destination to
// hold one copy of it, sent by the crashed send alone.
func wantOneCopyTakenOver(t *testing.T, e *env, p2 *ingest.Pipeline, c2 *tgsim.Client, posted tg.Message) {
	t.Helper()
	mustHandle(t, p2, e.view(c2, posted), store.OutcomeDuplicate)
	e.deliver()
	copies := 0
	for _, m := range e.world.Messages(e.dest) {
		if m.Document != nil && m.Document.File.UniqueID == posted.Document.File.UniqueID {
			copies++
		}
	}
	if copies != 1 {
		t.Fatalf("destination holds %d copies after the other instance reconciled, want 1", copies)
	}
	if sends := e.world.Calls("a")[tg.MethodSendMessage]; sends != 1 {
		t.Errorf("%d sendMessage calls, want 1 (the crashed one)", sends)
	}
}

// TDLib answers searchChatMessages with a filter and an empty query from
// its own message database once that holds the chat's index, and a
// destination channel no session opens receives no new messages by
// update. A copy another instance sent before it crashed is therefore
// not in the local answer of the instance that takes the delivery over:
// reconciliation must read the destination's history from the server, or
// the part is sent twice.
func TestReconcileFindsAnotherInstancesCopy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	if !e.world.LocalView() {
		t.Fatal("the world has no local view by default")
	}
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "other.tar", Data: archivetest.Tar([]archivetest.File{{Name: "o", Data: []byte("o")}})})

	// The second instance's database already holds the destination's
	// document index, as after an earlier reconciliation there.
	p2, c2 := e.pipelineIn("a", "instance-2")
	if _, err := c2.SearchChatMessages(e.ctx, tg.Search{Chat: e.dest, Limit: tg.MaxSearchLimit, Filter: tg.FilterDocument}); err != nil {
		t.Fatal(err)
	}

	// The first instance sends and dies before recording the send.
	crashOn(t, e, e.world.Client("a"), posted)
	if n := len(e.world.Messages(e.dest)); n != 1 {
		t.Fatalf("destination holds %d messages after the crashed send, want 1", n)
	}
	// The local answer indeed lacks it.
	local, err := c2.SearchChatMessages(e.ctx, tg.Search{Chat: e.dest, Limit: tg.MaxSearchLimit, Filter: tg.FilterDocument})
	if err != nil || len(local) != 0 {
		t.Fatalf("local search = %d messages, %v; want the copy missing from the second instance's database", len(local), err)
	}

	// The second instance takes the delivery over.
	wantOneCopyTakenOver(t, e, p2, c2, posted)
	counts, err := e.st.DeliveryCounts(e.ctx)
	if err != nil || counts[store.DeliverySent] != 1 || counts[store.DeliveryIntent] != 0 {
		t.Fatalf("deliveries = %v, %v; want the intent recorded as sent", counts, err)
	}
}
