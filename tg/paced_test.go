package tg_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// A 429 pauses every request of its account and of no other.
func TestFloodWaitPausesOnlyItsAccount(t *testing.T) {
	t.Parallel()
	w := tgsim.NewWorld(tgsim.Config{Seed: 1})
	w.AddAccount("a", false)
	w.AddAccount("b", false)
	chat := w.AddChat(tg.KindChannel, "c", "a", "b")
	reg := prometheus.NewRegistry()
	m := tg.NewMetrics(reg)
	ca, cb := w.Client("a"), w.Client("b")
	defer ca.Close()
	defer cb.Close()
	pa := tg.NewPaced(ca, tg.PacedConfig{Account: "a", MaxFloodWaits: 1}, m)
	pb := tg.NewPaced(cb, tg.PacedConfig{Account: "b", MaxFloodWaits: 1}, m)
	ctx := t.Context()
	for _, p := range []*tg.Paced{pa, pb} {
		if err := p.LoadChats(ctx); err != nil {
			t.Fatal(err)
		}
	}

	w.InjectFloodWait("a", tg.MethodGetChat, time.Hour, 1)
	_, err := pa.GetChat(ctx, chat)
	if d, ok := tg.FloodWait(err); !ok || d != time.Hour {
		t.Fatalf("GetChat = %v, want a one-hour flood wait", err)
	}
	if until := pa.PausedUntil(); time.Until(until) < 59*time.Minute {
		t.Fatalf("account a paused until %v, want about an hour", until)
	}

	// a's next request waits (here: until its context gives up) without
	// reaching Telegram.
	before := w.Calls("a")[tg.MethodGetChat]
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := pa.GetChat(short, chat); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("paused account's request = %v, want it held until its deadline", err)
	}
	if got := w.Calls("a")[tg.MethodGetChat]; got != before {
		t.Errorf("paused account made %d request(s) during the pause", got-before)
	}

	// b is not affected.
	if !pb.PausedUntil().IsZero() {
		t.Fatal("account b paused by account a's flood wait")
	}
	if _, err := pb.GetChat(ctx, chat); err != nil {
		t.Fatalf("account b: %v", err)
	}
	if got := testutil.ToFloat64(m.FloodWaitSeconds("a")); got != 3600 {
		t.Errorf("flood wait seconds of a = %v, want 3600", got)
	}
	if got := testutil.ToFloat64(m.FloodWaitSeconds("b")); got != 0 {
		t.Errorf("flood wait seconds of b = %v, want 0", got)
	}
}

// A request whose context says WithoutFloodWaits does not sit a flood
// wait out: answered with one, it returns it at once (the account is
// paused all the same); made while the account is paused, it fails at
// once with the time left, without reaching Telegram.
func TestWithoutFloodWaitsFailsAtOnce(t *testing.T) {
	t.Parallel()
	w := tgsim.NewWorld(tgsim.Config{Seed: 1})
	w.AddAccount("a", false)
	chat := w.AddChat(tg.KindChannel, "c", "a")
	c := w.Client("a")
	defer c.Close()
	p := tg.NewPaced(c, tg.PacedConfig{Account: "a", MaxFloodWaits: 3}, tg.NewMetrics(prometheus.NewRegistry()))
	ctx := tg.WithoutFloodWaits(t.Context())
	if err := p.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	w.InjectFloodWait("a", tg.MethodGetChatHistory, time.Hour, 1)
	if _, err := p.GetChatHistory(ctx, chat, 0, 10); !isFloodWait(err, time.Hour) {
		t.Fatalf("GetChatHistory = %v, want the one-hour flood wait at once (MaxFloodWaits 3)", err)
	}
	if time.Until(p.PausedUntil()) < 59*time.Minute {
		t.Fatal("the flood wait did not pause the account")
	}
	before := w.Calls("a")[tg.MethodGetChatHistory]
	if _, err := p.GetChatHistory(ctx, chat, 0, 10); !isFloodWait(err, 59*time.Minute) {
		t.Fatalf("request of the paused account = %v, want a flood wait of the time left", err)
	}
	if got := w.Calls("a")[tg.MethodGetChatHistory]; got != before {
		t.Errorf("paused account made %d request(s) during the pause", got-before)
	}
}

// isFloodWait reports whether err is a flood wait of at least min.
func isFloodWait(err error, min time.Duration) bool {
	d, ok := tg.FloodWait(err)
	return ok && d >= min
}

// Local requests (answered by TDLib without a server request) do not spend
// the account's request budget: with the bucket empty and no refill in
// sight, they still go through at once, while a server request waits.
func TestLocalRequestsSkipTheBudget(t *testing.T) {
	t.Parallel()
	w := tgsim.NewWorld(tgsim.Config{Seed: 1})
	w.AddAccount("a", false)
	chat := w.AddChat(tg.KindChannel, "c", "a")
	c := w.Client("a")
	defer c.Close()
	// One token, refilled once a week: the limiter refuses at once any
	// wait that would pass the context's deadline.
	p := tg.NewPaced(c, tg.PacedConfig{Account: "a", Rate: 1.0 / (7 * 24 * 3600), Burst: 1}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := p.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := p.GetChat(ctx, chat); err != nil {
			t.Fatalf("getChat %d with the budget spent: %v", i+1, err)
		}
		if err := p.OpenChat(ctx, chat); err != nil {
			t.Fatalf("openChat %d with the budget spent: %v", i+1, err)
		}
	}
	if _, err := p.SearchChatMessages(ctx, tg.Search{Chat: chat, Limit: 1, Filter: tg.FilterDocument}); err == nil {
		t.Fatal("a server request went through with the budget spent")
	}
	for _, m := range []string{tg.MethodGetChat, tg.MethodOpenChat, tg.MethodDeleteFile, tg.MethodCancelDownloadFile} {
		if !tg.LocalMethod(m) {
			t.Errorf("%s not local", m)
		}
	}
	for _, m := range []string{tg.MethodSearchChatMessages, tg.MethodDownloadFile, tg.MethodSendMessage, tg.MethodLoadChats} {
		if tg.LocalMethod(m) {
			t.Errorf("%s local", m)
		}
	}
}

// A gated account makes no request once its gate refuses: the request
// fails with the gate's error, counted as gated, and never reaches
// Telegram.
func TestGateStopsRequests(t *testing.T) {
	t.Parallel()
	w := tgsim.NewWorld(tgsim.Config{Seed: 1})
	w.AddAccount("a", false)
	chat := w.AddChat(tg.KindChannel, "c", "a")
	reg := prometheus.NewRegistry()
	m := tg.NewMetrics(reg)
	c := w.Client("a")
	defer c.Close()
	var lost atomic.Bool
	p := tg.NewPaced(c, tg.PacedConfig{Account: "a", Gate: func() error {
		if lost.Load() {
			return tg.ErrLeaseLost
		}
		return nil
	}}, m)
	ctx := t.Context()
	if err := p.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	search := tg.Search{Chat: chat, Limit: 1}
	if _, err := p.SearchChatMessages(ctx, search); err != nil {
		t.Fatal(err)
	}
	before := w.Calls("a")
	lost.Store(true)
	if _, err := p.SearchChatMessages(ctx, search); !errors.Is(err, tg.ErrLeaseLost) {
		t.Fatalf("SearchChatMessages after the gate closed = %v, want ErrLeaseLost", err)
	}
	// A local request reaches no server: it passes.
	if _, err := p.GetChat(ctx, chat); err != nil {
		t.Errorf("GetChat (local) after the gate closed = %v, want it answered", err)
	}
	if _, err := p.SendDocument(ctx, chat, "remote", "caption"); !errors.Is(err, tg.ErrLeaseLost) {
		t.Fatalf("SendDocument after the gate closed = %v, want ErrLeaseLost", err)
	}
	after := w.Calls("a")
	for _, method := range []string{tg.MethodSearchChatMessages, tg.MethodSendMessage} {
		if after[method] != before[method] {
			t.Errorf("%s reached Telegram %d time(s) after the gate closed", method, after[method]-before[method])
		}
	}
	if got := testutil.ToFloat64(m.Requests("a", tg.MethodSearchChatMessages, "gated")); got != 1 {
		t.Errorf("gated searchChatMessages counted %v times, want 1", got)
	}
}

// A client's method gets the account's gate in its context (tg.Gated), so
// that a method of several requests asks it before each of them, not only
// Paced before the first.
func TestGateReachesTheClientsMethod(t *testing.T) {
	t.Parallel()
	w := tgsim.NewWorld(tgsim.Config{Seed: 1})
	w.AddAccount("a", false)
	c := w.Client("a")
	defer c.Close()
	var asked atomic.Int32
	probe := &gateProbe{Client: c}
	m := tg.NewMetrics(prometheus.NewRegistry())
	p := tg.NewPaced(probe, tg.PacedConfig{Account: "a", Gate: func() error {
		if asked.Add(1) > 1 {
			return tg.ErrLeaseLost
		}
		return nil
	}}, m)
	// The probe fails as the adapter does when the gate refuses one of
	// its requests; the method's refusal counts as gated, not as an error.
	if err := p.LoadChats(t.Context()); !errors.Is(err, tg.ErrLeaseLost) {
		t.Fatalf("LoadChats refused inside: %v, want ErrLeaseLost", err)
	}
	if !errors.Is(probe.seen, tg.ErrLeaseLost) {
		t.Errorf("the gate as the client's LoadChats saw it: %v, want ErrLeaseLost (asked %d times)", probe.seen, asked.Load())
	}
	for result, want := range map[string]float64{"gated": 1, "error": 0, "ok": 0} {
		if got := testutil.ToFloat64(m.Requests("a", tg.MethodLoadChats, result)); got != want {
			t.Errorf("loadChats counted %v times as %s, want %v", got, result, want)
		}
	}
	if err := tg.Gated(t.Context()); err != nil {
		t.Errorf("a context without a gate: %v, want nil", err)
	}
}

// gateProbe records what the gate in its LoadChats's context answers.
type gateProbe struct {
	tg.Client
	seen error
}

func (g *gateProbe) LoadChats(ctx context.Context) error {
	g.seen = tg.Gated(ctx)
	return g.seen
}

// deleteMessages is paced like every server request: a 429 answering it
// pauses the account.
func TestDeleteMessagesIsPaced(t *testing.T) {
	t.Parallel()
	w, chat, p := pacedChannel(t, 1)
	ctx := t.Context()
	if tg.LocalMethod(tg.MethodDeleteMessages) {
		t.Error("deleteMessages taken for a local request")
	}
	w.InjectFloodWait("a", tg.MethodDeleteMessages, time.Hour, 1)
	if err := p.DeleteMessages(ctx, chat, []tg.MessageID{tg.MessageIDFromServer(1)}, true); err == nil {
		t.Fatal("DeleteMessages survived its flood wait")
	}
	if until := p.PausedUntil(); time.Until(until) < 59*time.Minute {
		t.Errorf("account paused until %v after deleteMessages' 429, want about an hour", until)
	}
	if got := w.Calls("a")[tg.MethodDeleteMessages]; got != 1 {
		t.Errorf("deleteMessages counted %d times, want 1", got)
	}
}

// A 429 answering a send request pauses the account's sends, not its
// reading: its other requests go on at once, its next send fails at once
// with the time left (a send never sits a flood wait out), and another
// account is not paused at all.
func TestSendFloodWaitPausesOnlyTheAccountsSends(t *testing.T) {
	t.Parallel()
	w, chat, p := pacedChannel(t, 3)
	ctx := t.Context()
	w.InjectFloodWait("a", tg.MethodSendMessage, time.Hour, 1)
	if _, err := p.SendDocumentTo(tg.WithoutFloodWaits(ctx), chat, 0, "remote", "x", tg.SendOptions{}); !isFloodWait(err, time.Hour) {
		t.Fatalf("SendDocumentTo = %v, want the one-hour flood wait", err)
	}
	if time.Until(p.SendPausedUntil()) < 59*time.Minute {
		t.Fatal("the send's flood wait did not pause the account's sends")
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := p.GetChatHistory(short, chat, 0, 10); err != nil {
		t.Fatalf("GetChatHistory while the sends are paused = %v, want it made", err)
	}
	if !p.PausedUntil().IsZero() {
		t.Errorf("account's requests paused until %v by a send's flood wait", p.PausedUntil())
	}
	before := w.Calls("a")[tg.MethodSendMessageAlbum]
	if _, err := p.SendDocumentAlbum(tg.WithoutFloodWaits(ctx), chat, 0, []tg.AlbumItem{{RemoteFileID: "r"}, {RemoteFileID: "s"}}, tg.SendOptions{}); !isFloodWait(err, 59*time.Minute) {
		t.Fatalf("album send while the sends are paused = %v, want a flood wait of the time left", err)
	}
	if got := w.Calls("a")[tg.MethodSendMessageAlbum]; got != before {
		t.Errorf("paused sends made %d request(s)", got-before)
	}
}

// pacedChannel is a world with account a, a member of one channel, and a
// Paced over a's client (its chats loaded) that sits out maxFloodWaits
// flood waits a request.
func pacedChannel(t *testing.T, maxFloodWaits int) (*tgsim.World, tg.ChatID, *tg.Paced) {
	t.Helper()
	w := tgsim.NewWorld(tgsim.Config{Seed: 1})
	w.AddAccount("a", false)
	chat := w.AddChat(tg.KindChannel, "c", "a")
	c := w.Client("a")
	t.Cleanup(func() { c.Close() })
	p := tg.NewPaced(c, tg.PacedConfig{Account: "a", MaxFloodWaits: maxFloodWaits}, tg.NewMetrics(prometheus.NewRegistry()))
	if err := p.LoadChats(t.Context()); err != nil {
		t.Fatal(err)
	}
	return w, chat, p
}
