package listener

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const chat = tg.ChatID(-1001)

func setup(t *testing.T, capacity int, watermark int64) (*Listener, *store.Store, *Metrics) {
	return setupTB(t, capacity, watermark)
}

func setupTB(t testing.TB, capacity int, watermark int64) (*Listener, *store.Store, *Metrics) {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.EnsureSource(t.Context(), store.Source{ChatID: chat, Account: "a"}); err != nil {
		t.Fatal(err)
	}
	if watermark > 0 {
		if err := st.AdvanceWatermark(t.Context(), chat, watermark); err != nil {
			t.Fatal(err)
		}
	}
	src, err := st.GetSource(t.Context(), chat)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	l := New(Config{Account: "a", QueueCapacity: capacity}, st, m)
	l.Watch(src)
	return l, st, m
}

func doc(s int64) tg.NewMessage {
	return tg.NewMessage{Message: tg.Message{ChatID: chat, ID: tg.MessageIDFromServer(s),
		Document: &tg.Document{FileName: "a.zip"}}}
}

func text(s int64) tg.NewMessage {
	return tg.NewMessage{Message: tg.Message{ChatID: chat, ID: tg.MessageIDFromServer(s)}}
}

func stored(t *testing.T, l *Listener, st *store.Store) store.Source {
	t.Helper()
	l.flush(t.Context())
	src, err := st.GetSource(t.Context(), chat)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestStartsDirty(t *testing.T) {
	t.Parallel()
	l, st, _ := setup(t, 4, 10)
	if !l.IsDirty(chat) {
		t.Fatal("a watched source must start dirty")
	}
	if src := stored(t, l, st); !src.Dirty || src.DirtyReason != ReasonStart {
		t.Errorf("stored source = dirty %v (%q), want dirty (start)", src.Dirty, src.DirtyReason)
	}
}

func TestOverflowMarksDirtyAndCounts(t *testing.T) {
	t.Parallel()
	l, st, m := setup(t, 1, 10)
	l.CaughtUp(chat, store.Era{}, 10)
	if l.IsDirty(chat) {
		t.Fatal("catch-up to the watermark must sync an idle source")
	}
	l.HandleUpdate(doc(11))
	l.HandleUpdate(doc(12)) // the queue holds one: dropped
	if !l.IsDirty(chat) {
		t.Fatal("a dropped event must mark the source dirty")
	}
	if got := testutil.ToFloat64(m.overflows.WithLabelValues("a")); got != 1 {
		t.Errorf("overflows = %v, want 1", got)
	}
	if src := stored(t, l, st); !src.Dirty || src.DirtyReason != ReasonOverflow {
		t.Errorf("stored source = dirty %v (%q), want dirty (overflow)", src.Dirty, src.DirtyReason)
	}
	if n := len(l.Queue()); n != 1 {
		t.Errorf("queue holds %d items, want 1", n)
	}
}

func TestGapMarksDirty(t *testing.T) {
	t.Parallel()
	l, st, _ := setup(t, 8, 10)
	l.CaughtUp(chat, store.Era{}, 10)
	l.HandleUpdate(text(11))
	if l.IsDirty(chat) {
		t.Fatal("a contiguous event must not dirty the source")
	}
	l.HandleUpdate(text(13)) // 12 never arrived
	if !l.IsDirty(chat) {
		t.Fatal("an id discontinuity must mark the source dirty")
	}
	if src := stored(t, l, st); src.DirtyReason != ReasonGap {
		t.Errorf("dirty reason = %q, want gap", src.DirtyReason)
	}
}

func TestChatLastMessageAheadMarksDirty(t *testing.T) {
	t.Parallel()
	l, _, _ := setup(t, 8, 10)
	l.CaughtUp(chat, store.Era{}, 10)
	l.HandleUpdate(tg.ChatLastMessage{Chat: chat, LastMessageID: tg.MessageIDFromServer(10)})
	if l.IsDirty(chat) {
		t.Fatal("a last message already seen must not dirty the source")
	}
	l.HandleUpdate(tg.ChatLastMessage{Chat: chat, LastMessageID: tg.MessageIDFromServer(11)})
	if !l.IsDirty(chat) {
		t.Fatal("a last message above the last id seen must mark the source dirty")
	}
	// A catch-up that read the chat before 11 existed cannot hand off.
	if l.CaughtUp(chat, store.Era{}, 10) {
		t.Fatal("synced below a message announced by updateChatLastMessage")
	}
	if !l.CaughtUp(chat, store.Era{}, 11) {
		t.Fatal("not synced once catch-up covered the announced message")
	}
}

func TestConnectionLossMarksDirtyAndCountsReconnect(t *testing.T) {
	t.Parallel()
	l, _, m := setup(t, 8, 10)
	var downs []time.Duration
	l.cfg.OnReconnect = func(d time.Duration) { downs = append(downs, d) }
	l.HandleUpdate(tg.ConnectionStateChanged{State: tg.ConnReady})
	l.CaughtUp(chat, store.Era{}, 10)
	l.HandleUpdate(tg.ConnectionStateChanged{State: tg.ConnConnecting})
	if !l.IsDirty(chat) {
		t.Fatal("leaving ready must mark sources dirty")
	}
	if got := testutil.ToFloat64(m.connected.WithLabelValues("a")); got != 0 {
		t.Errorf("connected = %v while connecting", got)
	}
	l.HandleUpdate(tg.ConnectionStateChanged{State: tg.ConnReady})
	if got := testutil.ToFloat64(m.reconnects.WithLabelValues("a")); got != 1 {
		t.Errorf("reconnects = %v, want 1", got)
	}
	if len(downs) != 1 {
		t.Errorf("outage reported %d times, want 1", len(downs))
	}
}

func TestWatermarkAdvancesOnlyOverContiguousHandledIDs(t *testing.T) {
	t.Parallel()
	l, st, _ := setup(t, 8, 10)
	l.CaughtUp(chat, store.Era{}, 10)
	for s := int64(11); s <= 13; s++ {
		l.HandleUpdate(doc(s))
	}
	items := map[int64]Item{}
	for range 3 {
		it := <-l.Queue()
		items[it.Message.ID.ServerID()] = it
	}
	l.Done(items[13])
	l.Done(items[12])
	if low, _, _ := l.Watermark(chat); low != 10 {
		t.Fatalf("watermark = %d with 11 in flight, want 10", low)
	}
	if src := stored(t, l, st); src.Watermark != 10 {
		t.Fatalf("stored watermark = %d with 11 in flight, want 10", src.Watermark)
	}
	l.Done(items[11])
	if low, _, _ := l.Watermark(chat); low != 13 {
		t.Fatalf("watermark = %d after 11..13 handled, want 13", low)
	}
	if src := stored(t, l, st); src.Watermark != 13 || src.Dirty {
		t.Fatalf("stored source = watermark %d dirty %v, want 13 synced", src.Watermark, src.Dirty)
	}
	// A text message needs no worker and moves the watermark at once.
	l.HandleUpdate(text(14))
	if low, _, _ := l.Watermark(chat); low != 14 {
		t.Errorf("watermark = %d after a text message, want 14", low)
	}
}

func TestReleasedItemHoldsWatermark(t *testing.T) {
	t.Parallel()
	l, _, _ := setup(t, 8, 10)
	l.CaughtUp(chat, store.Era{}, 10)
	l.HandleUpdate(doc(11))
	l.HandleUpdate(doc(12))
	first, second := <-l.Queue(), <-l.Queue()
	l.Release(first) // abandoned: not handled
	l.Done(second)
	if low, _, _ := l.Watermark(chat); low != 10 {
		t.Errorf("watermark = %d past an abandoned message, want 10", low)
	}
}

// Catch-up hands a dirty source back to the live stream only once it has
// covered everything before the first live event it did not see.
func TestHandOffAtFirstLiveEvent(t *testing.T) {
	t.Parallel()
	l, _, _ := setup(t, 8, 10)
	l.HandleUpdate(doc(20)) // live while dirty: 11..19 are catch-up's
	it := <-l.Queue()
	l.Done(it)
	if l.CaughtUp(chat, store.Era{}, 18) {
		t.Fatal("synced before catch-up reached the first live event")
	}
	if !l.CaughtUp(chat, store.Era{}, 19) {
		t.Fatal("not synced after catch-up reached the first live event")
	}
	if low, _, _ := l.Watermark(chat); low != 20 {
		t.Errorf("watermark = %d, want 20 (19 from catch-up, 20 handled live)", low)
	}
}

func TestInFlightDuplicateIgnored(t *testing.T) {
	t.Parallel()
	l, _, _ := setup(t, 8, 10)
	l.HandleUpdate(doc(11))
	l.HandleUpdate(doc(11))
	if n := len(l.Queue()); n != 1 {
		t.Errorf("queue holds %d items for one message, want 1", n)
	}
}

func TestHandleUpdateNeverBlocks(t *testing.T) {
	t.Parallel()
	l, _, _ := setup(t, 1, 0)
	done := make(chan struct{})
	go func() {
		for s := int64(1); s <= 10_000; s++ {
			l.HandleUpdate(doc(s))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("HandleUpdate blocked on a full queue")
	}
}

// A basic group takes its ids from the account's message box: a jump is no
// gap, and the watermark moves over handled ids but never past one still
// in flight.
func TestBasicGroupHasNoIDContinuity(t *testing.T) {
	t.Parallel()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	const group = tg.ChatID(-4012345678)
	if err := st.EnsureSource(t.Context(), store.Source{ChatID: group, Account: "a", Kind: tg.KindBasicGroup}); err != nil {
		t.Fatal(err)
	}
	if err := st.AdvanceWatermark(t.Context(), group, 10); err != nil {
		t.Fatal(err)
	}
	src, err := st.GetSource(t.Context(), group)
	if err != nil {
		t.Fatal(err)
	}
	l := New(Config{Account: "a", QueueCapacity: 8}, st, nil)
	l.Watch(src)
	l.CaughtUp(group, store.Era{}, 10)

	msg := func(s int64, document bool) tg.NewMessage {
		m := tg.Message{ChatID: group, ID: tg.MessageIDFromServer(s)}
		if document {
			m.Document = &tg.Document{FileName: "a.zip"}
		}
		return tg.NewMessage{Message: m}
	}
	l.HandleUpdate(msg(14, false))
	l.HandleUpdate(msg(17, true))
	l.HandleUpdate(msg(23, false))
	if l.IsDirty(group) {
		t.Fatal("id jumps in a basic group marked it dirty")
	}
	if low, _, _ := l.Watermark(group); low != 14 {
		t.Errorf("watermark with 17 in flight = %d, want 14", low)
	}
	item := <-l.Queue()
	l.Done(item)
	if low, _, _ := l.Watermark(group); low != 23 {
		t.Errorf("watermark once 17 was handled = %d, want 23", low)
	}
}

// updateSupergroup with the account's status left makes the source dirty,
// so that catch-up's next server call finds the lost access and records it.
func TestAccessLostMarksDirty(t *testing.T) {
	t.Parallel()
	l, st, _ := setup(t, 8, 10)
	l.CaughtUp(chat, store.Era{}, 10)
	l.HandleUpdate(tg.ChatAccessLost{Chat: chat})
	if !l.IsDirty(chat) {
		t.Fatal("a lost access left the source synced")
	}
	if src := stored(t, l, st); src.DirtyReason != ReasonAccessLost {
		t.Errorf("dirty reason = %q, want %q", src.DirtyReason, ReasonAccessLost)
	}
}

// A lost access reported while catch-up scans the source (dirty from its
// start) is not covered by that scan: catch-up's progress leaves it dirty
// and in doubt until a server call made after the report reads the chat.
func TestAccessLostDuringAScanStaysInDoubt(t *testing.T) {
	t.Parallel()
	l, _, _ := setup(t, 8, 10)
	before := l.AccessMark(chat) // the scan begins
	l.HandleUpdate(tg.ChatAccessLost{Chat: chat})
	l.AccessRead(chat, before) // its server call succeeded, made before the report
	if l.CaughtUp(chat, store.Era{}, 10) || !l.IsDirty(chat) || !l.AccessInDoubt(chat) {
		t.Fatal("the scan that began before the lost access made the source synced")
	}
	l.AccessRead(chat, l.AccessMark(chat)) // the next scan reads the chat
	if !l.CaughtUp(chat, store.Era{}, 10) || l.IsDirty(chat) || l.AccessInDoubt(chat) {
		t.Error("a scan after the lost access read the chat, and the source is not synced")
	}
}

// TDLib's report of the account a member again (updateSupergroup) is
// offered to catch-up once, and makes a scan after it read a member's
// chat; a loss reported after it takes both back.
func TestAccessHeldAfterALoss(t *testing.T) {
	t.Parallel()
	l, _, _ := setup(t, 8, 10)
	l.HandleUpdate(tg.ChatAccessLost{Chat: chat})
	if l.MemberSinceLoss(chat) || len(l.TakeRejoined()) != 0 {
		t.Fatal("a lost chat counts as a member's")
	}
	l.HandleUpdate(tg.ChatAccessHeld{Chat: chat})
	if got := l.TakeRejoined(); !slices.Equal(got, []tg.ChatID{chat}) || !l.MemberSinceLoss(chat) || !l.AccessInDoubt(chat) {
		t.Fatalf("after the member report: rejoined %v, member %v, doubt %v; want the source, true, true (a scan must still read it)",
			got, l.MemberSinceLoss(chat), l.AccessInDoubt(chat))
	}
	if got := l.TakeRejoined(); len(got) != 0 {
		t.Errorf("the report was offered twice: %v", got)
	}
	l.HandleUpdate(tg.ChatAccessHeld{Chat: chat})
	l.HandleUpdate(tg.ChatAccessLost{Chat: chat})
	if got := l.TakeRejoined(); len(got) != 0 || l.MemberSinceLoss(chat) {
		t.Errorf("a loss after the member report: rejoined %v, member %v; want neither", got, l.MemberSinceLoss(chat))
	}
}

// A fetch refused for want of access that is recorded after TDLib
// reported the account a member again (the refusal came first, its
// letter's record later) puts the source in doubt, so a scan reads it,
// but is no loss TDLib reported: the account is still a member, and the
// scan that reads the chat shows a member's access, not a public chat
// read from outside (not_member).
func TestRefusedFetchAfterTheMemberReportKeepsTheMember(t *testing.T) {
	t.Parallel()
	l, _, _ := setup(t, 8, 10)
	l.HandleUpdate(tg.ChatAccessLost{Chat: chat})
	l.HandleUpdate(tg.ChatAccessHeld{Chat: chat})
	l.MarkDirty(chat, ReasonAccessLost)
	if !l.AccessInDoubt(chat) || !l.MemberSinceLoss(chat) {
		t.Fatalf("doubt %v, member %v; want both: a scan reads the source, and records a member's access",
			l.AccessInDoubt(chat), l.MemberSinceLoss(chat))
	}
}

// A watched source's lag is exported from the start, before any update,
// so dashboards and alerts see every source at once.
func TestLagExportedOnWatch(t *testing.T) {
	t.Parallel()
	_, _, m := setup(t, 4, 10)
	if n := testutil.CollectAndCount(m.lag, "stashd_source_lag_messages"); n != 1 {
		t.Fatalf("%d lag series after Watch, want the source's", n)
	}
	if got := testutil.ToFloat64(m.lag.WithLabelValues(strconv.FormatInt(int64(chat), 10))); got != 0 {
		t.Errorf("lag = %v, want 0", got)
	}
}
