package ingest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// timedSends records when each send to a chat starts and ends.
type timedSends struct {
	*tg.Session
	mu    sync.Mutex
	sends map[tg.ChatID][][2]time.Time
}

func (s *timedSends) SendTo(ctx context.Context, chat tg.ChatID, thread int64, remoteID, caption string) (tg.Message, error) {
	start := time.Now()
	m, err := s.Session.SendTo(ctx, chat, thread, remoteID, caption)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends[chat] = append(s.sends[chat], [2]time.Time{start, time.Now()})
	return m, err
}

// TDLib sits out a chat's flood wait of up to a minute itself: the send
// just takes that long to land. While one destination's send is sat out,
// the account's sends to its other destinations go on.
func TestSendSatOutInOneDestinationHoldsNoSendToAnother(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	other := e.world.AddChat(tg.KindChannel, "second mirror", "a")
	e.world.LimitChatSends(e.dest, 0.5, 1) // the mirror's second send sits out about 2 s
	rec := &timedSends{sends: map[tg.ChatID][][2]time.Time{}}
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Destinations = []tg.ChatID{e.dest, other} },
		func(s *tg.Session) ingest.Telegram { rec.Session = s; return rec })
	for _, name := range []string{"a.tar", "b.tar", "c.tar"} {
		data := archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})
		mustHandle(t, p, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: data})), store.OutcomePackage)
	}
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(e.ctx)
	if err != nil || res.Delivered != 6 {
		t.Fatalf("RunOnce = %+v, %v; want 6 delivered", res, err)
	}
	if n := e.world.FloodWaitsSatOut("a"); n == 0 {
		t.Fatal("no flood wait was sat out: the test proves nothing")
	}
	var satOut [2]time.Time // the mirror's longest send
	for _, s := range rec.sends[e.dest] {
		if s[1].Sub(s[0]) > satOut[1].Sub(satOut[0]) {
			satOut = s
		}
	}
	if satOut[1].Sub(satOut[0]) < time.Second {
		t.Fatalf("the mirror's longest send took %s; want one sat out", satOut[1].Sub(satOut[0]))
	}
	if got := len(rec.sends[other]); got != 3 {
		t.Fatalf("%d sends to the second mirror, want 3", got)
	}
	last := rec.sends[other][2]
	if last[1].After(satOut[0]) && last[0].After(satOut[1].Add(-100*time.Millisecond)) {
		t.Errorf("the second mirror's last send started %s after the mirror's send sat out for %s began: it waited for it",
			last[0].Sub(satOut[0]).Round(time.Millisecond), satOut[1].Sub(satOut[0]).Round(time.Millisecond))
	}
}

// A backlog larger than a batch, to more destinations than lanes, goes in
// one run: the stage reads again as lanes free, leaving out the
// destinations a lane holds, until nothing is left.
func TestLanesDrainABacklogPastBatchAndLanes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	dests := []tg.ChatID{e.dest, e.world.AddChat(tg.KindChannel, "second mirror", "a"), e.world.AddChat(tg.KindChannel, "third mirror", "a")}
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Destinations = dests }, nil)
	const packages = 4
	for i := range packages {
		name := string(rune('a'+i)) + ".tar"
		data := archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})
		mustHandle(t, p, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: data})), store.OutcomePackage)
	}
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{Batch: 2, Lanes: 2}, p, e.st, nil).RunOnce(e.ctx)
	if err != nil || res.Delivered != packages*len(dests) {
		t.Fatalf("RunOnce = %+v, %v; want %d delivered", res, err, packages*len(dests))
	}
	for _, d := range dests {
		seen := map[string]int{}
		for _, m := range e.world.Messages(d) {
			if m.Document != nil {
				seen[m.Document.FileName]++
			}
		}
		if len(seen) != packages {
			t.Errorf("destination %d holds %v, want each of %d packages", d, seen, packages)
		}
		for name, n := range seen {
			if n != 1 {
				t.Errorf("destination %d holds %s %d times", d, name, n)
			}
		}
	}
	if n, err := e.st.QueuedDeliveries(e.ctx, ""); err != nil || n != 0 {
		t.Errorf("%d deliveries still queued (%v)", n, err)
	}
}
