package catchup_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/archive/archivetest"
	"stashd/catchup"
	"stashd/ingest"
	"stashd/internal/pgtest"
	"stashd/listener"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

type world struct {
	t       *testing.T
	w       *tgsim.World
	st      *store.Store
	dest    tg.ChatID
	sources []tg.ChatID
}

func newWorld(t *testing.T, sources int, opts ...func(*tgsim.Config)) *world {
	t.Helper()
	return newWorldOn(t, pgtest.New(t), sources, opts...)
}

// newWorldOn is newWorld with its catalogue in the database at url.
func newWorldOn(t *testing.T, url string, sources int, opts ...func(*tgsim.Config)) *world {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: url, MaxConns: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	cfg := tgsim.Config{Seed: 3, FilesDir: t.TempDir()}
	for _, o := range opts {
		o(&cfg)
	}
	w := &world{t: t, st: st, w: tgsim.NewWorld(cfg)}
	w.w.AddAccount("a", false)
	w.dest = w.w.AddChat(tg.KindChannel, "mirror", "a")
	for i := range sources {
		w.addSource(tg.KindChannel, fmt.Sprintf("source %d", i))
	}
	return w
}

func (w *world) addSource(kind tg.ChatKind, title string) tg.ChatID {
	c := w.w.AddChat(kind, title, "a")
	if err := w.st.EnsureSource(w.t.Context(), store.Source{ChatID: c, Account: "a", Kind: kind}); err != nil {
		w.t.Fatal(err)
	}
	w.sources = append(w.sources, c)
	return c
}

func (w *world) post(chat tg.ChatID, thread int64, n int) {
	for i := range n {
		data := archivetest.Tar([]archivetest.File{{Name: "f.txt", Data: fmt.Appendf(nil, "%d/%d/%d", chat, thread, i)}})
		w.w.Post(chat, thread, tgsim.Post{FileName: fmt.Sprintf("pack-%d.tar", i), Data: data})
		w.w.Post(chat, thread, tgsim.Post{Text: "chatter"})
	}
}

// instance is one daemon process's view of account "a": a fresh client,
// listener state loaded from the store, and a catch-up loop.
type instance struct {
	c     *tgsim.Client
	lst   *listener.Listener
	catch *catchup.Catchup
	m     *catchup.Metrics
	// deliver is the account's delivery stage: ingest queues deliveries.
	deliver *ingest.Deliverer
	sess    *tg.Session
	pipe    *ingest.Pipeline
}

func (w *world) start() *instance { return w.startWith("", nil) }

// startIn is start on TDLib database directory dir: another instance of
// the account, with a directory of its own.
func (w *world) startIn(dir string) *instance { return w.startWith(dir, nil) }

// startWith is start on directory dir; with lag, catch-up's getChat shows
// those last messages (laggingChat: a session whose view lags).
func (w *world) startWith(dir string, lag map[tg.ChatID]tg.MessageID) *instance {
	t := w.t
	t.Helper()
	ctx := t.Context()
	c := w.w.ClientIn("a", dir)
	t.Cleanup(func() { _ = c.Close() })
	lst := listener.New(listener.Config{Account: "a"}, w.st, nil)
	sess := tg.NewSession(c, lst.HandleUpdate)
	if err := sess.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	srcs, err := w.st.Sources(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range srcs {
		lst.Watch(s)
	}
	// As the daemon does: a channel's updates reach only a session that
	// opened it. A source the account cannot read fails to open; its
	// scans find out.
	for _, chat := range w.sources {
		_ = sess.OpenChat(ctx, chat)
	}
	p := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{w.dest}}, w.st, sess, nil)
	m := catchup.NewMetrics(prometheus.NewRegistry())
	var session catchup.Telegram = sess
	if lag != nil {
		session = laggingChat{Session: sess, last: lag}
	}
	cu := catchup.New(catchup.Config{Account: "a", Owner: cmp.Or(dir, "test"), Sources: w.sources,
		Policy: store.ScanPolicy{CircuitBase: time.Hour}}, w.st, session, lst, p, m)
	return &instance{c: c, lst: lst, catch: cu, m: m, deliver: ingest.NewDeliverer(ingest.DeliveryConfig{}, p, w.st, nil), sess: sess, pipe: p}
}

// drainQueue lets in's workers handle what its listener queued.
func drainQueue(t *testing.T, in *instance) {
	t.Helper()
	for {
		select {
		case it := <-in.lst.Queue():
			if _, err := in.pipe.Process(t.Context(), it.Message); err != nil {
				t.Fatal(err)
			}
			in.lst.Done(it)
		default:
			return
		}
	}
}

func (w *world) runOnce(in *instance) (catchup.Result, map[string]int) {
	w.t.Helper()
	w.w.ResetCalls()
	res, err := in.catch.RunOnce(w.t.Context())
	if err != nil {
		w.t.Fatalf("catch-up: %v", err)
	}
	// The deliveries the cycle queued are sent, and counted with it.
	if _, err := in.deliver.RunOnce(w.t.Context()); err != nil {
		w.t.Fatalf("delivery stage: %v", err)
	}
	return res, w.w.Calls("a")
}

func (w *world) delivered() int {
	n := 0
	for _, m := range w.w.Messages(w.dest) {
		if m.Document != nil {
			n++
		}
	}
	return n
}

func TestDirtySourcePagesEverythingFromWatermark(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	w.post(w.sources[0], 0, 230) // more than two pages of documents
	in := w.start()
	res, calls := w.runOnce(in)
	if res.Paged != 1 || res.Messages != 230 {
		t.Fatalf("result = %+v, want one source paged with 230 messages", res)
	}
	if got := w.delivered(); got != 230 {
		t.Fatalf("delivered %d, want 230", got)
	}
	if calls[tg.MethodSearchChatMessages] > 4 {
		t.Errorf("%d searches for 230 documents, want at most 4 pages of 100", calls[tg.MethodSearchChatMessages])
	}
	if in.lst.IsDirty(w.sources[0]) {
		t.Error("source still dirty after a complete catch-up")
	}
	src, err := w.st.GetSource(t.Context(), w.sources[0])
	if err != nil {
		t.Fatal(err)
	}
	last := w.w.Messages(w.sources[0])
	if want := last[len(last)-1].ID.ServerID(); src.Watermark != want {
		t.Errorf("watermark = %d, want the last message %d", src.Watermark, want)
	}
}

func TestSyncedCycleCostsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 3)
	for _, s := range w.sources {
		w.post(s, 0, 3)
	}
	in := w.start()
	w.runOnce(in)
	res, calls := w.runOnce(in)
	if len(calls) != 0 {
		t.Errorf("a steady idle cycle made calls: %v", calls)
	}
	if res.Synced != 3 {
		t.Errorf("result = %+v, want 3 synced", res)
	}
}

func TestIdleRestartCostsOneGetChatPerSource(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 2)
	for _, s := range w.sources {
		w.post(s, 0, 5)
	}
	w.runOnce(w.start())

	// Restart: a new process, every source dirty, nothing new published.
	in := w.start()
	res, calls := w.runOnce(in)
	if calls[tg.MethodSearchChatMessages] != 0 {
		t.Errorf("idle restart searched %d times, want 0", calls[tg.MethodSearchChatMessages])
	}
	if calls[tg.MethodGetChat] != 2 || len(calls) != 1 {
		t.Errorf("idle restart calls = %v, want exactly one getChat per source", calls)
	}
	if res.Current != 2 {
		t.Errorf("result = %+v, want 2 up to date", res)
	}
}

// The seed design's case: a forum with 1,086 topics and 49 channels. A
// forum is one chat, so a restart costs one call per source. Every
// channel holds a message, as a real one always does (the service message
// of its creation, which the simulator does not make): a chat whose last
// message TDLib reports null is paged, as its last message is unknown.
func TestForumWithManyTopicsCostsOneCallOnRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 49)
	for _, s := range w.sources {
		w.w.Post(s, 0, tgsim.Post{Text: "channel created"})
	}
	forum := w.addSource(tg.KindForum, "big forum")
	threads := make([]int64, 1086)
	for i := range threads {
		threads[i] = w.w.AddTopic(forum, fmt.Sprintf("topic %d", i))
	}
	for i := 0; i < len(threads); i += 100 {
		w.post(forum, threads[i], 1)
	}
	w.post(w.sources[0], 0, 2)
	w.runOnce(w.start())

	_, calls := w.runOnce(w.start())
	total := 0
	for _, n := range calls {
		total += n
	}
	if total > 50 || calls[tg.MethodSearchChatMessages] != 0 {
		t.Errorf("restart with 49 channels and a 1,086-topic forum made %d calls (%v), want at most 50 and no search", total, calls)
	}
}

func TestPermanentFailureOpensCircuitWithoutDelayingOthers(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 2)
	bad, good := w.sources[0], w.sources[1]
	w.post(good, 0, 4)
	w.w.SetPrivate(bad, true)
	in := w.start()
	// TDLib's load reports the account a member of each channel, through
	// the update pump: one taken after the failure below would read as
	// the account back, and reopen the circuit at the next cycle.
	for deadline := time.Now().Add(10 * time.Second); !in.lst.MemberSinceLoss(bad); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the load's member report never reached the listener")
		}
	}
	res, _ := w.runOnce(in)
	if res.Errors != 1 || res.Paged != 1 {
		t.Fatalf("result = %+v, want the private source failed and the other paged", res)
	}
	if got := w.delivered(); got != 4 {
		t.Errorf("delivered %d from the healthy source, want 4", got)
	}
	label := strconv.FormatInt(int64(bad), 10)
	if got := testutil.ToFloat64(in.m.CircuitOpen(label)); got != 1 {
		t.Errorf("stashd_source_circuit_open{source=%s} = %v, want 1", label, got)
	}
	src, err := w.st.GetSource(t.Context(), bad)
	if err != nil {
		t.Fatal(err)
	}
	if src.CircuitUntil.Before(time.Now().Add(30*time.Minute)) || src.LastError == "" {
		t.Errorf("source = %+v, want the circuit open for the base interval with the error kept", src)
	}
	// Next cycle: the open circuit costs nothing.
	res, calls := w.runOnce(in)
	if res.Circuit != 1 || len(calls) != 0 {
		t.Errorf("second cycle = %+v with calls %v, want circuit_open and no call", res, calls)
	}
}

// Two instances sharing the database never scan the same source at once.
func TestClaimsAreExclusive(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	ctx := context.Background()
	first, err := w.st.ClaimSources(ctx, "a", "one", w.sources, time.Minute)
	if err != nil || len(first) != 1 {
		t.Fatalf("first claim = %v, %v", first, err)
	}
	second, err := w.st.ClaimSources(ctx, "a", "two", w.sources, time.Minute)
	if err != nil || len(second) != 0 {
		t.Fatalf("second instance claimed %d sources while the first holds them", len(second))
	}
}

// A message seen and then deleted leaves the chat's last message below the
// newest id seen; catch-up must still hand the source back to the live
// stream instead of waiting forever for an id that no longer exists.
func TestDeletedTailDoesNotKeepSourceDirty(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	chat := w.sources[0]
	w.post(chat, 0, 3)
	in := w.start()
	w.runOnce(in)
	if in.lst.IsDirty(chat) {
		t.Fatal("not synced after the first catch-up")
	}
	drain(in.lst.Wake())
	gone := w.w.Post(chat, 0, tgsim.Post{Text: "soon deleted"})
	select {
	case <-in.lst.Wake(): // updateChatLastMessage made it dirty
	case <-time.After(10 * time.Second):
		t.Fatal("the source never became dirty")
	}
	w.w.Delete(chat, gone.ID)
	res, _ := w.runOnce(in)
	if in.lst.IsDirty(chat) {
		t.Fatalf("source still dirty after catch-up (%+v): it waits for a deleted message", res)
	}
}

// drain empties a signal channel.
func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// A chat whose last message TDLib reports as unknown (null) may have gained
// messages without any update: catch-up must page instead of taking the
// unknown last message for "nothing new".
func TestUnknownLastMessagePagesInsteadOfShortcut(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	chat := w.sources[0]
	w.post(chat, 0, 2)
	w.runOnce(w.start())
	if got := w.delivered(); got != 2 {
		t.Fatalf("delivered %d before the unknown stretch, want 2", got)
	}

	w.w.SetLastMessageUnknown(chat, true)
	w.post(chat, 0, 3) // added without updateNewMessage or updateChatLastMessage; one new content
	in := w.start()
	res, calls := w.runOnce(in)
	if res.Current != 0 || calls[tg.MethodSearchChatMessages] == 0 {
		t.Fatalf("result = %+v, calls %v: an unknown last message was taken for nothing new", res, calls)
	}
	// TDLib drops from the search the messages newer than the last one the
	// session learned through updates, and fetches the chat's difference,
	// which brings them as updateNewMessage, through the session's update
	// pump: they are waited for.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		drainQueue(t, in)
		if _, err := in.deliver.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := w.delivered(); got == 3 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("delivered %d, want all 3 distinct packages", got)
		}
	}
	if in.lst.IsDirty(chat) {
		t.Error("source still dirty after paging")
	}
}

// An account that lost a source still reads it locally (getChat succeeds)
// while every server call fails with "Can't access the chat": catch-up
// records the source inaccessible with that reason, opens its circuit and
// shows it on the gauge, without holding up the other source.
func TestLostAccessRecordsSourceInaccessible(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 2)
	lost, good := w.sources[0], w.sources[1]
	w.post(lost, 0, 2)
	w.runOnce(w.start())

	w.w.LoseAccess(lost, true)
	w.post(lost, 0, 3)
	w.post(good, 0, 2)
	in := w.start()
	// TDLib's load reports the loss through the update pump: the source
	// is in doubt once the listener took the report. Before that, the
	// session's local view shows the lost source as current.
	for deadline := time.Now().Add(10 * time.Second); !in.lst.AccessInDoubt(lost); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the load's report of the loss never reached the listener")
		}
	}
	res, calls := w.runOnce(in)
	if res.Errors != 1 || res.Paged != 1 {
		t.Fatalf("result = %+v (calls %v), want the lost source failed and the other paged", res, calls)
	}
	src, err := w.st.GetSource(t.Context(), lost)
	if err != nil {
		t.Fatal(err)
	}
	if src.Access != store.AccessLost || !strings.Contains(src.AccessReason, "Can't access the chat") {
		t.Errorf("lost source access = %q (%q), want %q with the error as reason", src.Access, src.AccessReason, store.AccessLost)
	}
	if src.CircuitUntil.IsZero() {
		t.Error("lost source's circuit is closed, want it open")
	}
	label := strconv.FormatInt(int64(lost), 10)
	if got := testutil.ToFloat64(in.m.Inaccessible(label)); got != 1 {
		t.Errorf("stashd_source_inaccessible{source=%s} = %v, want 1", label, got)
	}
	other, err := w.st.GetSource(t.Context(), good)
	if err != nil {
		t.Fatal(err)
	}
	if other.Access != store.AccessOK {
		t.Errorf("healthy source access = %q, want %q", other.Access, store.AccessOK)
	}
	st, err := w.st.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Sources {
		if tg.ChatID(s.ChatID) == lost && s.Access != store.AccessLost {
			t.Errorf("status shows the lost source as %q, want %q", s.Access, store.AccessLost)
		}
	}

	// Access comes back: the next scan that reads the source records it.
	if src, err = w.st.FinishScan(t.Context(), lost, "test", store.ScanOutcome{ChatRead: true, Read: true}, store.ScanPolicy{}); err != nil || src.Access != store.AccessOK || src.AccessReason != "" {
		t.Errorf("after a successful scan: access %q (%q), %v; want %q", src.Access, src.AccessReason, err, store.AccessOK)
	}
}

// TDLib asks for 406 errors to be dropped silently: no failure counted, no
// circuit, and the source is caught up on a later cycle.
func TestIgnoredErrorIsSilent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	chat := w.sources[0]
	w.post(chat, 0, 2)
	in := w.start()
	w.w.InjectError("a", tg.MethodGetChat, &tg.Error{Code: 406, Message: "CHANNEL_TOO_LARGE"}, 1)
	res, err := in.catch.RunOnce(t.Context())
	if err != nil {
		t.Fatalf("a 406 surfaced as a cycle error: %v", err)
	}
	src, gerr := w.st.GetSource(t.Context(), chat)
	if gerr != nil {
		t.Fatal(gerr)
	}
	if src.Failures != 0 || !src.CircuitUntil.IsZero() || src.LastError != "" {
		t.Errorf("after a 406: %+v (result %+v), want no failure, no circuit, no error", src, res)
	}
	if !in.lst.IsDirty(chat) {
		t.Error("source synced on a cycle whose getChat failed")
	}
	w.runOnce(in)
	if got := w.delivered(); got != 2 {
		t.Errorf("delivered %d after the retry, want 2", got)
	}
}

// TDLib announces a lost access (updateSupergroup, status left) but
// getChat still shows the old last message: catch-up must make a server
// call instead of taking the source for current.
func TestAccessLostWithNothingNewIsVerified(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	chat := w.sources[0]
	w.post(chat, 0, 2)
	in := w.start()
	w.runOnce(in)
	if in.lst.IsDirty(chat) {
		t.Fatal("not synced after the first catch-up")
	}
	drain(in.lst.Wake())
	w.w.LoseAccess(chat, true)
	select {
	case <-in.lst.Wake():
	case <-time.After(10 * time.Second):
		t.Fatal("the lost access never made the source dirty")
	}
	res, calls := w.runOnce(in)
	if res.Current != 0 || calls[tg.MethodSearchChatMessages] == 0 {
		t.Fatalf("result %+v, calls %v: the lost source was taken for current", res, calls)
	}
	src, err := w.st.GetSource(t.Context(), chat)
	if err != nil {
		t.Fatal(err)
	}
	if src.Access != store.AccessLost {
		t.Errorf("access = %q, want %q", src.Access, store.AccessLost)
	}
}

// lossDuringSearch is the session, which loses the access to chat right
// after its first search there answered, the update about it arriving at
// once, while catch-up still works on the page.
type lossDuringSearch struct {
	*tg.Session
	w    *tgsim.World
	lst  *listener.Listener
	chat tg.ChatID
	once sync.Once
}

func (s *lossDuringSearch) SearchChatMessages(ctx context.Context, q tg.Search) ([]tg.Message, error) {
	msgs, err := s.Session.SearchChatMessages(ctx, q)
	if q.Chat == s.chat {
		s.once.Do(func() {
			s.w.LoseAccess(s.chat, true)
			s.lst.HandleUpdate(tg.ChatAccessLost{Chat: s.chat})
		})
	}
	return msgs, err
}

// A lost access TDLib reports while a catch-up pages the source is not
// covered by that scan, whose server calls came before it: the source
// stays dirty, and the next cycle's server call finds the loss and
// records the source inaccessible.
func TestAccessLostDuringAScanIsRecorded(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	chat := w.sources[0]
	for i := range 3 { // documents only: the page that reads them is the scan's last server call
		w.w.Post(chat, 0, tgsim.Post{FileName: fmt.Sprintf("doc-%d.tar", i), Data: archivetest.Tar([]archivetest.File{{Name: "f", Data: []byte{byte(i)}}})})
	}
	in := w.start()
	sess := &lossDuringSearch{Session: in.sess, w: w.w, lst: in.lst, chat: chat}
	cu := catchup.New(catchup.Config{Account: "a", Owner: "test", Sources: w.sources,
		Policy: store.ScanPolicy{CircuitBase: time.Hour}}, w.st, sess, in.lst, in.pipe, nil)
	if res, err := cu.RunOnce(t.Context()); err != nil || res.Paged != 1 {
		t.Fatalf("first cycle: %+v, %v; want the source paged", res, err)
	}
	if !in.lst.IsDirty(chat) || !in.lst.AccessInDoubt(chat) {
		t.Fatal("the loss reported during the scan was forgotten: the source is synced")
	}
	if _, err := cu.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	src, err := w.st.GetSource(t.Context(), chat)
	if err != nil {
		t.Fatal(err)
	}
	if src.Access != store.AccessLost {
		t.Errorf("access after the next cycle = %q, want %q", src.Access, store.AccessLost)
	}
}

// A restarted daemon exports a source's open circuit from its record at
// the first cycle, before the circuit lets the source be tried again.
func TestOpenCircuitExportedAfterRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	bad := w.sources[0]
	w.w.SetPrivate(bad, true)
	w.runOnce(w.start())

	again := w.start()
	w.runOnce(again)
	label := strconv.FormatInt(int64(bad), 10)
	if got := testutil.ToFloat64(again.m.CircuitOpen(label)); got != 1 {
		t.Errorf("after a restart, stashd_source_circuit_open{source=%s} = %v, want 1", label, got)
	}
}

// prelockCounter is the pipeline, counting its Prelock calls and the
// messages they lock, and the releases.
type prelockCounter struct {
	*ingest.Pipeline
	mu                        sync.Mutex
	calls, locked, biggest    int
	released                  int
	startedBeyondLockedAheads int
	started                   int
}

func (p *prelockCounter) Prelock(ctx context.Context, msgs []tg.Message) func() {
	p.mu.Lock()
	p.calls++
	p.locked += len(msgs)
	p.biggest = max(p.biggest, len(msgs))
	if p.started > p.locked-len(msgs) {
		// A message started before the one locked ahead of it.
		p.startedBeyondLockedAheads++
	}
	p.mu.Unlock()
	release := p.Pipeline.Prelock(ctx, msgs)
	return func() {
		p.mu.Lock()
		p.released++
		p.mu.Unlock()
		release()
	}
}

func (p *prelockCounter) Process(ctx context.Context, msg tg.Message) (store.Outcome, error) {
	p.mu.Lock()
	p.started++
	p.mu.Unlock()
	return p.Pipeline.Process(ctx, msg)
}

// A page's messages are locked ahead of the workers, Parallel at a time in
// one round trip, each group once the messages before it have started; the
// locks go once the page is done.
func TestPageLockedAheadInGroups(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1)
	w.post(w.sources[0], 0, 30) // 60 messages: 30 documents and chatter
	in := w.start()
	counted := &prelockCounter{Pipeline: in.pipe}
	cu := catchup.New(catchup.Config{Account: "a", Owner: "test", Sources: w.sources, Parallel: 4}, w.st, in.sess, in.lst, counted, nil)
	res, err := cu.RunOnce(t.Context())
	if err != nil || res.Messages != 30 {
		t.Fatalf("catch-up: %+v, %v; want 30 documents handed to ingest", res, err)
	}
	if counted.locked != 30 || counted.biggest > 4 || counted.calls < 8 {
		t.Errorf("Prelock: %d calls locking %d messages, at most %d at once; want every document, 4 at a time", counted.calls, counted.locked, counted.biggest)
	}
	if counted.startedBeyondLockedAheads != 0 {
		t.Errorf("%d groups locked after a message of theirs started, want none", counted.startedBeyondLockedAheads)
	}
	if counted.released != counted.calls {
		t.Errorf("%d of %d groups' locks released after the page", counted.released, counted.calls)
	}
	var locks int
	if err := w.st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM package_locks`).Scan(&locks); err != nil || locks != 0 {
		t.Errorf("%d package locks left after catch-up (%v), want none", locks, err)
	}
}
