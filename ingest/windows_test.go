package ingest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/route"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// clockedSession advances the test's clock by step on every send: the send
// budget's spacing on a fake clock.
type clockedSession struct {
	*tg.Session
	e    *env
	step time.Duration
}

func (s clockedSession) SendTo(ctx context.Context, chat tg.ChatID, thread int64, remoteID, caption string) (tg.Message, error) {
	m, err := s.Session.SendTo(ctx, chat, thread, remoteID, caption)
	s.e.now = s.e.now.Add(s.step)
	return m, err
}

// Outside its window a route's deliveries wait; a window that closes
// mid-backlog leaves the rest waiting, reported as partial, and the next
// window delivers them, each once.
func TestWindowClosingMidBacklogResumesNextWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	src := e.src["a"]
	day := e.world.AddChat(tg.KindChannel, "day mirror", "a")
	any := e.world.AddChat(tg.KindChannel, "any time", "a")
	tbl := dayAndAlways(t, src, day, any)
	e.now = time.Date(2026, 3, 2, 19, 0, 0, 0, time.UTC) // after hours
	p, c, m := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = tbl },
		func(s *tg.Session) ingest.Telegram { return clockedSession{s, e, 20 * time.Minute} })
	reg := prometheus.NewRegistry()
	wm := ingest.NewWindowMetrics(reg)
	ws := ingest.NewDeliverer(ingest.DeliveryConfig{SendSpacing: 20 * time.Minute}, p, e.st, wm)

	var uids []string
	for _, name := range []string{"a.tar", "b.tar", "c.tar", "d.tar", "e.tar"} {
		msg := e.view(c, e.world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})}))
		mustHandle(t, p, msg, store.OutcomePackage)
		uids = append(uids, msg.Document.File.UniqueID)
	}
	if n := len(documentsIn(e, day)); n != 0 {
		t.Fatalf("%d documents delivered to the day mirror after hours", n)
	}
	if n := len(documentsIn(e, any)); n != 5 {
		t.Fatalf("the route without a window delivered %d of 5", n)
	}
	if got := testutil.ToFloat64(m.Deliveries(day, ingest.DeliveryWaiting)); got != 5 {
		t.Errorf("stashd_deliveries_total{outcome=waiting} = %v, want 5", got)
	}
	res, err := ws.RunOnce(e.ctx)
	if err != nil || res.Delivered != 0 || res.Waiting != 5 {
		t.Fatalf("RunOnce after hours = %+v, %v; want 5 waiting", res, err)
	}
	if testutil.ToFloat64(wm.Open("day")) != 0 || testutil.ToFloat64(wm.Waiting("a", "day")) != 5 {
		t.Errorf("metrics after hours: open %v, waiting %v", testutil.ToFloat64(wm.Open("day")), testutil.ToFloat64(wm.Waiting("a", "day")))
	}
	opens := time.Date(2026, 3, 3, 6, 0, 0, 0, time.UTC)
	if got := testutil.ToFloat64(wm.Opens("day")); got != float64(opens.Unix()) {
		t.Errorf("window opens at %v, want %v", time.Unix(int64(got), 0).UTC(), opens)
	}
	status, err := e.st.Status(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(status.Waiting) != 1 || status.Waiting[0].Deliveries != 5 || !status.Waiting[0].OpensAt.Equal(opens) {
		t.Errorf("status shows waiting %+v; want 5 deliveries opening at %s", status.Waiting, opens)
	}

	// Next day at 17:00: each send takes 20 minutes of the fake clock, so
	// three go before 18:00 and two are left.
	e.now = time.Date(2026, 3, 3, 17, 0, 0, 0, time.UTC)
	res, err = ws.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Delivered != 3 || res.Waiting != 2 || res.Partial != 1 {
		t.Fatalf("RunOnce across the closing = %+v; want 3 delivered, 2 waiting, one partial window", res)
	}
	status, err = e.st.Status(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(status.Partial) != 1 || status.Partial[0].Sent != 3 || status.Partial[0].Waiting != 2 {
		t.Fatalf("status shows partial windows %+v; want one with 3 sent and 2 waiting", status.Partial)
	}
	sentence := ingest.PartialSentence(status.Partial[0], time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC))
	for _, want := range []string{"closed at 18:00", "2 deliveries still waiting (3 delivered in it)", "resume when it opens at Wed 06:00", "at capacity"} {
		if !strings.Contains(sentence, want) {
			t.Errorf("partial sentence %q lacks %q", sentence, want)
		}
	}

	// The next window delivers the rest.
	e.now = time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC)
	res, err = ws.RunOnce(e.ctx)
	if err != nil || res.Delivered != 2 || res.Waiting != 0 {
		t.Fatalf("RunOnce in the next window = %+v, %v; want the 2 left delivered", res, err)
	}
	got := documentsIn(e, day)
	if len(got) != 5 {
		t.Fatalf("the day mirror holds %d documents, want 5", len(got))
	}
	seen := map[string]bool{}
	for _, u := range got {
		if seen[u] {
			t.Errorf("%s delivered twice", u)
		}
		seen[u] = true
	}
	for _, u := range uids {
		if !seen[u] {
			t.Errorf("%s never delivered", u)
		}
	}
	if status, err = e.st.Status(e.ctx); err != nil || len(status.Waiting) != 0 || len(status.Partial) != 0 {
		t.Errorf("status after the backlog: waiting %+v, partial %+v, %v", status.Waiting, status.Partial, err)
	}
}

// A waiting delivery whose source message is gone by the time its window
// opens is given up with its reason; the rest of the backlog goes on.
func TestWindowGivesUpADeliveryWhoseSourceIsGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	src, day, tbl := dayRoute(t, e)
	e.now = time.Date(2026, 3, 2, 19, 0, 0, 0, time.UTC)
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = tbl }, nil)
	ws := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil)
	var msgs []tg.Message
	for _, name := range []string{"gone.tar", "kept.tar"} {
		m := e.view(c, e.world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})}))
		mustHandle(t, p, m, store.OutcomePackage)
		msgs = append(msgs, m)
	}
	e.world.Delete(src, msgs[0].ID)
	e.now = time.Date(2026, 3, 3, 7, 0, 0, 0, time.UTC)
	res, err := ws.RunOnce(e.ctx)
	if err != nil || res.Delivered != 1 || res.Failed != 1 || res.Waiting != 0 {
		t.Fatalf("RunOnce = %+v, %v; want kept.tar delivered, gone.tar given up, nothing waiting", res, err)
	}
	if got := documentsIn(e, day); len(got) != 1 || got[0] != msgs[1].Document.File.UniqueID {
		t.Errorf("day mirror holds %v, want kept.tar only", got)
	}
}

// countingQueue counts the delivery stage's counts of its whole queue.
type countingQueue struct {
	*store.Store
	counts int
}

func (q *countingQueue) QueuedByRoute(ctx context.Context, account string) ([]store.RouteBacklog, error) {
	q.counts++
	return q.Store.QueuedByRoute(ctx, account)
}

// With a route's window open, the realtime path (a package queued, the
// stage woken, the package sent) does not count the account's whole queue
// for the window's report on every pass: that count reads every queued
// delivery, the window's backlog included. It counts again when a window
// opens or closes, or after an Interval.
func TestWindowReportCountsTheQueueOncePerWindowChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	src, _, tbl := dayRoute(t, e)
	e.now = time.Date(2026, 3, 3, 9, 0, 0, 0, time.UTC) // in the window
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = tbl }, nil)
	q := &countingQueue{Store: e.st}
	ws := ingest.NewDeliverer(ingest.DeliveryConfig{Interval: time.Hour}, p, q, nil)
	const n = 5
	for i := range n {
		name := string(rune('a'+i)) + ".tar"
		msg := e.view(c, e.world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})}))
		mustHandle(t, p, msg, store.OutcomePackage)
		if res, err := ws.RunOnce(e.ctx); err != nil || res.Delivered != 1 {
			t.Fatalf("RunOnce after package %d = %+v, %v; want it delivered", i, res, err)
		}
	}
	if q.counts != 1 {
		t.Errorf("the delivery stage counted its whole queue %d times for %d deliveries sent while the window stayed open; want once", q.counts, n)
	}
	// The window closes: its report counts the queue again.
	e.now = time.Date(2026, 3, 3, 19, 0, 0, 0, time.UTC)
	if _, err := ws.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	if q.counts != 2 {
		t.Errorf("after the window closed the queue was counted %d times in all; want twice", q.counts)
	}
}

// A window that closes while its deliveries wait out a flood wait, the
// stage idle, is still recorded as partial once the stage looks again.
func TestWindowClosingDuringAFloodWaitIsReportedPartial(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	src, _, tbl := dayRoute(t, e)
	e.now = time.Date(2026, 3, 2, 19, 0, 0, 0, time.UTC) // after hours: the deliveries wait for the window
	var pause time.Duration
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) {
		cfg.Routes = tbl
		cfg.DestPause = func(tg.ChatID) time.Duration { return pause }
	}, nil)
	ws := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil)
	for _, name := range []string{"a.tar", "b.tar"} {
		msg := e.view(c, e.world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})}))
		mustHandle(t, p, msg, store.OutcomePackage)
	}
	// In the window, a flood wait of an hour puts both off.
	e.now, pause = time.Date(2026, 3, 3, 17, 30, 0, 0, time.UTC), time.Hour
	if res, err := ws.RunOnce(e.ctx); err != nil || res.Delivered != 0 || res.Deferred != 2 {
		t.Fatalf("RunOnce in the flood wait = %+v, %v; want both put off", res, err)
	}
	// The window closed at 18:00; the wait ends at 18:30.
	e.now, pause = time.Date(2026, 3, 3, 18, 45, 0, 0, time.UTC), 0
	res, err := ws.RunOnce(e.ctx)
	if err != nil || res.Delivered != 0 {
		t.Fatalf("RunOnce after the close = %+v, %v; want nothing sent", res, err)
	}
	status, err := e.st.Status(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Partial != 1 || len(status.Partial) != 1 || status.Partial[0].Waiting != 2 {
		t.Errorf("after the window closed with 2 deliveries waiting: %d partial windows found, status shows %+v; want one, with 2 waiting",
			res.Partial, status.Partial)
	}
}

// dayRoute is source "a" routed to a new destination, the day mirror,
// only between 06:00 and 18:00.
// dayAndAlways routes src to day within 06:00-18:00 ("day") and to any
// at every hour ("always").
func dayAndAlways(t *testing.T, src, day, any tg.ChatID) *route.Table {
	t.Helper()
	w, err := route.ParseWindow("06:00-18:00", "")
	if err != nil {
		t.Fatal(err)
	}
	return route.NewTable(nil, []route.Route{
		{Name: "day", Sources: []route.Source{{Chat: src}}, Destinations: []tg.ChatID{day}, Window: &w},
		{Name: "always", Sources: []route.Source{{Chat: src}}, Destinations: []tg.ChatID{any}},
	})
}

func dayRoute(t *testing.T, e *env) (src, day tg.ChatID, tbl *route.Table) {
	t.Helper()
	src = e.src["a"]
	day = e.world.AddChat(tg.KindChannel, "day mirror", "a")
	w, err := route.ParseWindow("06:00-18:00", "")
	if err != nil {
		t.Fatal(err)
	}
	return src, day, route.NewTable(nil, []route.Route{{Name: "day", Sources: []route.Source{{Chat: src}}, Destinations: []tg.ChatID{day}, Window: &w}})
}

// Deliveries queued while their route's window was open, read after it
// closed, head the queue: each finds the window closed and waits for the
// next opening, which takes it out of the due queue. That is movement:
// the run reads on and sends the deliveries behind them on a route with
// no window, not up to an Interval later.
func TestDeliveriesBehindAClosedWindowGoInTheSameRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	src := e.src["a"]
	any := e.world.AddChat(tg.KindChannel, "any time", "a")
	day := e.world.AddChat(tg.KindChannel, "day mirror", "a") // made later: its deliveries come first in the queue
	tbl := dayAndAlways(t, src, day, any)
	e.now = time.Date(2026, 3, 2, 17, 0, 0, 0, time.UTC) // the window is open
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = tbl }, nil)
	for _, name := range []string{"a.tar", "b.tar"} {
		msg := e.view(c, e.world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})}))
		mustHandle(t, p, msg, store.OutcomePackage)
	}
	e.now = time.Date(2026, 3, 2, 19, 0, 0, 0, time.UTC) // closed before the stage reads
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{Batch: 1, Lanes: 1}, p, e.st, nil).RunOnce(e.ctx)
	if err != nil || res.Delivered != 2 {
		t.Errorf("RunOnce = %+v, %v; want both packages delivered to the route without a window in one run", res, err)
	}
	if got := documentsIn(e, day); len(got) != 0 {
		t.Errorf("the day mirror holds %d documents after hours", len(got))
	}
}
