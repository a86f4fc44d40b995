package daemon_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"

	"github.com/prometheus/client_golang/prometheus"
)

// An account that may not write to a destination (TDLib: 400 "Have no
// write access to the chat") hands its deliveries there to another account
// that can see the files; each package arrives once, sent by that account.
func TestAccountWithoutWriteAccessHandsDeliveriesOver(t *testing.T) {
	t.Parallel()
	t.Run("ingesting account", func(t *testing.T) { handOverRun(t, 0) })
	// With send budgets the deliveries spread over the accounts: the one
	// refused is not chosen again once refused.
	t.Run("spread over budgets", func(t *testing.T) { handOverRun(t, 6000) })
}

func handOverRun(t *testing.T, sendRate float64) {
	ctx := t.Context()
	st := openStore(t, poolConns)
	pr := newPair(t, 5, "a", "b") // b sees the files
	world, src, dest := pr.world, pr.src, pr.dest
	world.SetWriteAccess("a", dest, false)

	cfg := daemon.Config{
		Accounts:     pr.accounts(),
		Destinations: []tg.ChatID{dest}, Workers: 2, DrainTimeout: 10 * time.Second, SendRate: sendRate,
		Ingest:   ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		Delivery: ingest.DeliveryConfig{Interval: 100 * time.Millisecond},
	}
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	posted := postTars(world, src, "p", 3)
	for _, m := range posted {
		waitHandled(t, st, m.Key())
	}
	// b's window loop sends what was handed to it.
	waitDocuments(t, world, dest, len(posted))
	d.Shutdown(context.Background())
	checkOnce(t, world, dest, posted)
	for _, s := range world.Sends() {
		if s.Chat == dest && s.Account != "b" {
			t.Errorf("account %s's send to the destination was accepted; only b may write there", s.Account)
		}
	}
	var intents int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE state <> 'sent'`).Scan(&intents); err != nil {
		t.Fatal(err)
	}
	if intents != 0 {
		t.Errorf("%d deliveries not recorded as sent", intents)
	}
}

// When no account may post in a destination, its deliveries stay queued:
// the whole backlog there is held at one refused send per hold, not tried
// delivery by delivery, and goes once one account's rights come back. None
// is given up, and stashd_delivery_unwritable counts them while they wait.
// The refusal comes from TDLib, which knows the rights (here in a
// channel), or from the server when TDLib's rights lag, the update that
// would tell it lost (here in a group restricted from documents): then
// each send is accepted and fails in updateMessageSendFailed. The same
// holds for accounts removed from the destination: TDLib, told, refuses
// the sends itself; not told (the channel made private), it makes them,
// and the server refuses each with CHANNEL_PRIVATE.
func TestDeliveriesWaitWhileNoAccountMayWrite(t *testing.T) {
	t.Parallel()
	removed := func(w *tgsim.World, _ string, chat tg.ChatID, ok bool) { w.LoseAccess(chat, !ok) }
	private := func(w *tgsim.World, _ string, chat tg.ChatID, ok bool) { w.SetPrivate(chat, !ok) }
	for _, c := range []struct {
		name   string
		kind   tg.ChatKind
		revoke func(w *tgsim.World, account string, chat tg.ChatID, ok bool)
	}{
		{"TDLib refuses", tg.KindChannel, (*tgsim.World).SetWriteAccess},
		{"the server refuses", tg.KindSupergroup, (*tgsim.World).SetServerWriteAccess},
		{"removed, TDLib refuses", tg.KindChannel, removed},
		{"removed, the server refuses", tg.KindChannel, private},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			deliveriesWaitForWriteAccess(t, c.kind, c.revoke)
		})
	}
}

func deliveriesWaitForWriteAccess(t *testing.T, kind tg.ChatKind, revoke func(w *tgsim.World, account string, chat tg.ChatID, ok bool)) {
	ctx := t.Context()
	st := openStore(t, poolConns)
	pr := newPair(t, 7, "a", "b")
	world, src, dest := pr.world, pr.src, pr.dest
	if kind != tg.KindChannel {
		dest = world.AddChat(kind, "mirror group", "a", "b")
	}
	revoke(world, "a", dest, false)
	revoke(world, "b", dest, false)

	cfg := daemon.Config{
		Accounts:     pr.accounts(),
		Destinations: []tg.ChatID{dest}, Workers: 2, DrainTimeout: 10 * time.Second,
		Ingest:   ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		Delivery: ingest.DeliveryConfig{Interval: 50 * time.Millisecond, RetryDelay: 100 * time.Millisecond},
		Registry: prometheus.NewRegistry(),
	}
	d := daemon.New(cfg, st, pr.dial)
	daemon.SetBacklogInterval(d, 50*time.Millisecond)
	prepareAndRun(t, d)
	unwritable := func() float64 {
		mfs, err := cfg.Registry.(prometheus.Gatherer).Gather()
		if err != nil {
			t.Fatal(err)
		}
		v, _ := metricIn(mfs, "stashd_delivery_unwritable", strconv.FormatInt(int64(dest), 10))
		return v
	}
	const n = 20
	posted := postTars(world, src, "w", n)
	// Every package is catalogued and its delivery queued, held.
	held := func() int {
		var k int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM waiting_deliveries WHERE strpos(last_error, $1) > 0`,
			tg.ErrNoWriteAccess.Error()).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	deadline := time.Now().Add(30 * time.Second)
	for held() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries held for write access", held(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	world.ResetCalls()
	time.Sleep(time.Second)
	sends := world.Calls("a")["sendMessage"] + world.Calls("b")["sendMessage"]
	if sends >= n {
		t.Errorf("%d sends to a destination no account may post in, in a second, for %d deliveries: want fewer than one each", sends, n)
	}
	if k := held(); k != n {
		t.Errorf("%d of %d deliveries still queued while no account may post", k, n)
	}
	if n := len(world.Messages(dest)); n != 0 {
		t.Fatalf("%d messages in the destination while no account may post", n)
	}
	if v := unwritable(); v != n {
		t.Errorf("stashd_delivery_unwritable = %v while %d deliveries are held, want %d", v, n, n)
	}

	revoke(world, "b", dest, true)
	waitDocuments(t, world, dest, n)
	for deadline := time.Now().Add(10 * time.Second); unwritable() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stashd_delivery_unwritable = %v once every delivery went, want 0", unwritable())
		}
	}
	d.Shutdown(context.Background())
	checkOnce(t, world, dest, posted)
	var open int
	if err := st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM deliveries WHERE state <> 'sent') +
		(SELECT count(*) FROM waiting_deliveries)`).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != 0 {
		t.Errorf("%d deliveries not recorded as sent or still queued", open)
	}
}

// A delivery is handed over only to an account that knows the package's
// source and the destination: one that does not would fail to load the
// parts or to send them (400 "Chat not found", "Can't access the chat")
// and give the delivery up. Account a, refused write access to the
// destination, keeps its deliveries held when b cannot take them: b not in
// the source, b not in the destination, or b removed from the source
// (its TDLib still knows the chat, its reads fail: b hands the deliveries
// back and is not chosen again for that source). None is given up, b
// sends nothing, and each package goes once a may write again.
func TestHandOverOnlyToAnAccountThatKnowsBothChats(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name            string
		src, destMember []string
		bRemoved        bool
	}{
		{"b not in the source", []string{"a"}, []string{"a", "b"}, false},
		{"b not in the destination", []string{"a", "b"}, []string{"a"}, false},
		{"b removed from the source", []string{"a", "b"}, []string{"a", "b"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			world := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir()})
			world.AddAccount("a", false)
			world.AddAccount("b", false)
			pr := pair{world: world, src: world.AddChat(tg.KindChannel, "a's source", c.src...),
				other: world.AddChat(tg.KindChannel, "b's source", "b"), dest: world.AddChat(tg.KindChannel, "mirror", c.destMember...)}
			if c.bRemoved {
				world.RemoveMember("b", pr.src, true)
			}
			handOverWaits(t, pr)
		})
	}
}

func handOverWaits(t *testing.T, pr pair) {
	st := openStore(t, poolConns)
	world, src, dest := pr.world, pr.src, pr.dest
	world.SetWriteAccess("a", dest, false)
	cfg := daemon.Config{
		Accounts:     pr.accounts(),
		Destinations: []tg.ChatID{dest}, Workers: 2, DrainTimeout: 10 * time.Second,
		Ingest:   ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		Delivery: ingest.DeliveryConfig{Interval: 50 * time.Millisecond, RetryDelay: 100 * time.Millisecond},
	}
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Shutdown(context.Background())
	const n = 3
	posted := postTars(world, src, "h", n)
	waitHeldForWrite(t, st, n)
	for _, s := range world.Sends() {
		if s.Chat == dest {
			t.Errorf("account %s sent to the destination while a may not write there and b cannot deliver", s.Account)
		}
	}
	world.SetWriteAccess("a", dest, true)
	waitDocuments(t, world, dest, n)
	checkOnce(t, world, dest, posted)
}

// An account removed from the destination, while another account is
// still a member of it and of the source, hands its deliveries there to
// that account: each package arrives once, sent by it.
func TestAccountRemovedFromDestinationHandsDeliveriesOver(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 9, "a", "b")
	world, src, dest := pr.world, pr.src, pr.dest
	world.RemoveMember("a", dest, true)
	cfg := daemon.Config{
		Accounts:     pr.accounts(),
		Destinations: []tg.ChatID{dest}, Workers: 2, DrainTimeout: 10 * time.Second,
		Ingest:   ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		Delivery: ingest.DeliveryConfig{Interval: 50 * time.Millisecond, RetryDelay: 100 * time.Millisecond},
	}
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	posted := postTars(world, src, "r", 3)
	waitDocuments(t, world, dest, len(posted))
	d.Shutdown(context.Background())
	checkOnce(t, world, dest, posted)
	for _, s := range world.Sends() {
		if s.Chat == dest && s.Account != "b" {
			t.Errorf("account %s's send to a destination it was removed from was accepted", s.Account)
		}
	}
}

// waitHeldForWrite waits until n deliveries are held with account a,
// refused write access to the destination; it fails the test after 30s:
// the others were handed to b and given up.
func waitHeldForWrite(t *testing.T, st *store.Store, n int) {
	t.Helper()
	ctx := t.Context()
	held := func() int {
		var k int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM waiting_deliveries WHERE account = 'a' AND strpos(last_error, $1) > 0`,
			tg.ErrNoWriteAccess.Error()).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	for deadline := time.Now().Add(30 * time.Second); held() < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			var queued int
			if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM waiting_deliveries`).Scan(&queued); err != nil {
				t.Fatal(err)
			}
			t.Fatalf("%d of %d deliveries held with a for write access (%d queued): the others were handed to b and given up", held(), n, queued)
		}
	}
}
