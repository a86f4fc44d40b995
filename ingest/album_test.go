package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// postRarSet posts a rar set of n volumes in account a's source and
// catalogues it through p; it returns the volumes as c sees them.
func postRarSet(t *testing.T, e *env, p *ingest.Pipeline, c *tgsim.Client, stem string, n int) []tg.Message {
	t.Helper()
	vols := archivetest.RarVolumes([]archivetest.File{{Name: stem + "/data.bin", Data: []byte(strings.Repeat(stem, 3000))}}, n)
	var msgs []tg.Message
	for i, v := range vols {
		msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("%s.part%d.rar", stem, i+1), Data: v})))
	}
	for _, m := range msgs {
		if _, err := p.Handle(e.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the set completed", res, err)
	}
	return msgs
}

// checkOnceInOrder fails unless the destination holds each of msgs' files
// exactly once, in order.
func checkOnceInOrder(t *testing.T, got, msgs []tg.Message) {
	t.Helper()
	if len(got) != len(msgs) {
		t.Fatalf("destination holds %d documents, want the set's %d", len(got), len(msgs))
	}
	for i, m := range got {
		if m.Document.File.UniqueID != msgs[i].Document.File.UniqueID {
			t.Errorf("destination message %d is not part %d", i, i+1)
		}
	}
}

func TestSetDeliveredAsOneAlbum(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	msgs := postRarSet(t, e, p, c, "s", 3)
	got := e.delivered()
	checkOnceInOrder(t, got, msgs)
	calls := e.world.Calls("a")
	if calls[tg.MethodSendMessageAlbum] != 1 || calls[tg.MethodSendMessage] != 0 {
		t.Errorf("sendMessageAlbum %d, sendMessage %d; want one album, no lone send", calls[tg.MethodSendMessageAlbum], calls[tg.MethodSendMessage])
	}
	tokens := map[string]bool{}
	for _, m := range got {
		if m.AlbumID == 0 || m.AlbumID != got[0].AlbumID {
			t.Errorf("message %d in album %d, want all in one album", m.ID, m.AlbumID)
		}
		tokens[ingest.TokenOf(m.Caption)] = true
	}
	if len(tokens) != 3 || tokens[""] {
		t.Errorf("tokens %v; want each part its own", tokens)
	}
}

// A set of more than ten parts goes in even albums of at most ten.
func TestLargeSetInEvenAlbums(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	msgs := postRarSet(t, e, p, c, "big", 12)
	got := e.delivered()
	checkOnceInOrder(t, got, msgs)
	sizes := map[int64]int{}
	for _, m := range got {
		sizes[m.AlbumID]++
	}
	if len(sizes) != 2 || sizes[0] != 0 {
		t.Fatalf("album sizes %v; want two albums of 6", sizes)
	}
	for id, n := range sizes {
		if n != 6 {
			t.Errorf("album %d holds %d parts, want 6", id, n)
		}
	}
}

// An album whose middle message Telegram refuses lands in part: the parts
// that landed are recorded, the delivery is retried, and the retry sends
// only the refused part.
func TestAlbumLandedInPartIsCompleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	msgs := postRarSet(t, e, p, c, "p", 3)
	e.world.InjectSendFailures("a", false, true, false)
	stage := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil)
	if res, err := stage.RunOnce(e.ctx); err != nil || res.Deferred != 1 || res.Delivered != 0 {
		t.Fatalf("delivery with a refused message = %+v, %v; want it deferred", res, err)
	}
	if n := len(e.world.Messages(e.dest)); n != 2 {
		t.Fatalf("destination holds %d messages after the partial album, want 2", n)
	}
	e.now = e.now.Add(time.Minute) // past the retry delay
	checkOnceInOrder(t, e.delivered(), []tg.Message{msgs[0], msgs[2], msgs[1]})
	calls := e.world.Calls("a")
	if calls[tg.MethodSendMessageAlbum] != 1 || calls[tg.MethodSendMessage] != 1 {
		t.Errorf("sendMessageAlbum %d, sendMessage %d; want the album, then the refused part alone",
			calls[tg.MethodSendMessageAlbum], calls[tg.MethodSendMessage])
	}
	if calls[tg.MethodGetChatHistory] != 0 {
		t.Errorf("%d history reads; a refused send's intent is dropped, nothing to reconcile", calls[tg.MethodGetChatHistory])
	}
}

// crashingAlbums sends an album, then dies before the outcomes arrive.
type crashingAlbums struct{ crashingSession }

func (s crashingAlbums) SendAlbumTo(ctx context.Context, chat tg.ChatID, thread int64, items []tg.AlbumItem) ([]tg.AlbumResult, error) {
	if _, err := s.client.SendDocumentAlbum(ctx, chat, thread, items, tg.SendOptions{}); err != nil {
		return nil, err
	}
	_ = s.client.Close()
	s.kill()
	return nil, errors.New("process killed")
}

// A daemon killed after sending an album, before recording it, leaves
// three intents. The next attempt finds the messages that landed by their
// tokens in one pass over the destination and sends only what did not:
// nothing when the whole album landed, the missing part alone when Telegram
// refused one.
func TestCrashMidAlbumIsReconciled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		fails   []bool
		resends int
	}{
		{"whole album landed", nil, 0},
		{"middle message refused", []bool{false, true, false}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "a")
			p0, c0 := e.pipeline("a")
			msgs := postRarSet(t, e, p0, c0, "k", 3)
			if c.fails != nil {
				e.world.InjectSendFailures("a", c.fails...)
			}
			crashAfterAlbum(t, e)
			landed := 3 - c.resends
			if n := len(e.world.Messages(e.dest)); n != landed {
				t.Fatalf("destination holds %d messages after the crash, want %d", n, landed)
			}

			e.pipeline("a") // the restarted daemon's session
			e.now = e.now.Add(time.Minute)
			got := e.delivered()
			want := msgs
			if c.resends == 1 {
				want = []tg.Message{msgs[0], msgs[2], msgs[1]}
			}
			checkOnceInOrder(t, got, want)
			calls := e.world.Calls("a")
			if calls[tg.MethodSendMessageAlbum] != 1 || calls[tg.MethodSendMessage] != c.resends {
				t.Errorf("sendMessageAlbum %d, sendMessage %d; want the crashed album and %d lone resends",
					calls[tg.MethodSendMessageAlbum], calls[tg.MethodSendMessage], c.resends)
			}
			if calls[tg.MethodGetChatHistory] != 1 {
				t.Errorf("%d history reads, want one pass for the album's three intents", calls[tg.MethodGetChatHistory])
			}
			var open int
			if err := e.st.Pool().QueryRow(e.ctx, `SELECT count(*) FROM deliveries WHERE state <> 'sent'`).Scan(&open); err != nil || open != 0 {
				t.Errorf("%d deliveries not sent (%v), want none", open, err)
			}
		})
	}
}

// A queued delivery to a destination no account may send to yet (a flood
// wait there) is put off by the wait before its parts are loaded: a
// delivery a 429 puts off again and again costs no getMessage each time.
func TestPausedDestinationLoadsNoParts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p1, c1 := e.pipeline("a")
	postRarSet(t, e, p1, c1, "w", 3)
	// Another session of the account delivers: it kept no parts.
	wait := time.Minute
	p2, _, _ := e.pipelineWith("a", func(cfg *ingest.Config) {
		cfg.DestPause = func(dest tg.ChatID) time.Duration {
			if dest == e.dest {
				return wait
			}
			return 0
		}
	}, nil)
	before := e.world.Calls("a")[tg.MethodGetMessage]
	stage := ingest.NewDeliverer(ingest.DeliveryConfig{}, p2, e.st, nil)
	if res, err := stage.RunOnce(e.ctx); err != nil || res.Deferred != 1 {
		t.Fatalf("delivery to a paused destination = %+v, %v; want it deferred", res, err)
	}
	if got := e.world.Calls("a")[tg.MethodGetMessage] - before; got != 0 {
		t.Errorf("%d getMessage calls for a delivery to a paused destination, want none", got)
	}
	var due time.Time
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT opens_at FROM waiting_deliveries`).Scan(&due); err != nil {
		t.Fatal(err)
	}
	if d := due.Sub(e.now); d < wait-time.Second || d > wait+time.Second {
		t.Errorf("delivery put off by %s, want the pause's %s", d, wait)
	}
	// Put off by Telegram's pacing, the delivery was not tried: a failure
	// after the wait backs off from the first delay, not from one doubled
	// by the flood waits it met.
	var attempts int
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT attempts FROM waiting_deliveries`).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 {
		t.Errorf("a delivery put off by a flood wait counts %d failed attempts, want 0", attempts)
	}
	wait = 0
	e.now = e.now.Add(2 * time.Minute)
	if res, err := stage.RunOnce(e.ctx); err != nil || res.Delivered != 1 {
		t.Fatalf("delivery after the pause = %+v, %v; want it sent", res, err)
	}
	if got := e.world.Calls("a")[tg.MethodGetMessage] - before; got != 3 {
		t.Errorf("%d getMessage calls, want the 3 parts loaded once", got)
	}
}

// A reconciliation that gives up at its page limit still records the parts
// it found: here an album crashed with its middle message refused, under
// more history since its intents than one reconciliation reads. The two
// parts that landed are recorded as sent with their messages; the
// delivery is given up naming part 1, which is not sent blindly.
func TestReconcileAtThePageLimitRecordsWhatItFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p0, c0 := e.pipeline("a")
	postRarSet(t, e, p0, c0, "big", 3)
	// More than 50 pages of history, all newer than the intents to come.
	for i := range 50*tg.MaxSearchLimit + 10 {
		e.world.Post(e.dest, 0, tgsim.Post{Text: fmt.Sprintf("chatter %d", i)})
	}
	e.world.InjectSendFailures("a", false, true, false)
	crashAfterAlbum(t, e)

	p2, _ := e.pipeline("a")
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p2, e.st, nil).RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 1 {
		t.Errorf("result %+v, want the delivery given up", res)
	}
	rows, err := e.st.Pool().Query(e.ctx, `SELECT part_idx, state, coalesce(dest_message_id, 0) FROM deliveries ORDER BY part_idx`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var idx int
		var state string
		var msg int64
		if err := rows.Scan(&idx, &state, &msg); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s %t", idx, state, msg != 0))
	}
	if want := []string{"0 sent true", "1 intent false", "2 sent true"}; !slices.Equal(got, want) {
		t.Errorf("deliveries %v, want %v", got, want)
	}
	if calls := e.world.Calls("a"); calls[tg.MethodSendMessage] != 0 || calls[tg.MethodSendMessageAlbum] != 1 {
		t.Errorf("sendMessage %d, sendMessageAlbum %d; want only the crashed album", calls[tg.MethodSendMessage], calls[tg.MethodSendMessageAlbum])
	}
}

// crashAfterAlbum runs the delivery stage of a new session of account a
// that is killed right after its first album is sent, before anything is
// recorded, then closes the session, which lands the album.
func crashAfterAlbum(t *testing.T, e *env) {
	t.Helper()
	c1 := e.world.Client("a")
	if err := c1.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	ctx, kill := context.WithCancel(e.ctx)
	defer kill()
	p1 := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{e.dest}, Now: func() time.Time { return e.now }},
		e.st, crashingAlbums{crashingSession{tg.NewSession(c1, func(tg.Update) {}), c1, kill}}, nil)
	if _, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p1, e.st, nil).RunOnce(ctx); err == nil {
		t.Fatal("the delivery survived the crash")
	}
	_ = c1.Close()
}
