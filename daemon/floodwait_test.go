package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// sendFloodWait is a flood wait far longer than any test: a delivery that
// sits it out never ends within the test.
const sendFloodWait = time.Hour

// A 429 answering one account's send does not hold the deliveries another
// account can send: a writes to the destination first (configuration
// order) and every send of its is answered with an hour's flood wait; b
// may write there too, and sends every package, a's first included,
// without waiting for a's pause.
func TestSendFloodWaitOnOneAccountLeavesTheOtherSending(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 21, "a", "b")
	world, src, dest := pr.world, pr.src, pr.dest
	world.InjectFloodWait("a", tg.MethodSendMessage, sendFloodWait, 1000)
	d := daemon.New(floodConfig(pr.accounts(), dest), st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()

	posted := postTars(world, src, "f", 4)
	waitDocuments(t, world, dest, len(posted))
	checkOnce(t, world, dest, posted)
	if n := world.Calls("a")[tg.MethodSendMessage]; n > 1 {
		t.Errorf("a made %d sends while paused by its first one's flood wait; want 1", n)
	}
}

// A 429 answering a send holds the account's sends, not its reading: an
// archive posted while the account's only delivery waits out an hour's
// flood wait is catalogued at once, its delivery queued behind the wait.
func TestSendFloodWaitLeavesTheCatalogueCurrent(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 22, "a")
	world, src, dest := pr.world, pr.src, pr.dest
	world.InjectFloodWait("a", tg.MethodSendMessage, sendFloodWait, 1000)
	d := daemon.New(floodConfig(pr.accounts()[:1], dest), st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()

	first := postTars(world, src, "g", 1)[0]
	waitCatalogued(t, st, first.Key())
	deadline := time.Now().Add(30 * time.Second)
	for world.Calls("a")[tg.MethodSendMessage] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first package's send was never made")
		}
		time.Sleep(20 * time.Millisecond)
	}
	second := postTars(world, src, "h", 1)[0]
	waitCatalogued(t, st, second.Key())
	if n, err := st.QueuedDeliveries(t.Context(), ""); err != nil || n != 2 {
		t.Errorf("queued deliveries = %d (%v); want both, waiting for the flood wait", n, err)
	}
}

// A delivery a send's flood wait put off is sent once the wait ends, not
// at the delivery stage's next look (an hour here): nothing else wakes
// the stage.
func TestDeliveryPutOffByAFloodWaitIsSentWhenItEnds(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 25, "a")
	world, src, dest := pr.world, pr.src, pr.dest
	world.InjectFloodWait("a", tg.MethodSendMessage, 2*time.Second, 1)
	cfg := floodConfig(pr.accounts()[:1], dest)
	cfg.Delivery.Interval = time.Hour
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()

	posted := postTars(world, src, "w", 1)
	waitDocuments(t, world, dest, 1)
	checkOnce(t, world, dest, posted)
	if n := world.Calls("a")[tg.MethodSendMessage]; n != 2 {
		t.Errorf("a made %d sends; want the one the flood wait refused and the one after it", n)
	}
}

// waitCatalogued waits, bounded, until key is handled (not a part waiting
// for its set), whatever its deliveries.
func waitCatalogued(t testing.TB, st *store.Store, key tg.MessageKey) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, ok, err := st.MessageHandled(context.Background(), key)
		if err == nil && ok && out != store.OutcomePartPending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("message %s never catalogued (last look: %v, %v)", key, out, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A stop while the account's sends wait out a flood wait longer than the
// drain is prompt and leaves nothing to reconcile: the send refused by
// the 429 did not sit the wait out holding its intent, the delivery stays
// queued, put off by the wait, and once the wait has passed a restarted
// daemon sends it once.
func TestStopDuringSendFloodWaitLeavesNothingToReconcile(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 23, "a")
	world, src, dest := pr.world, pr.src, pr.dest
	world.InjectFloodWait("a", tg.MethodSendMessage, sendFloodWait, 1)
	cfg := floodConfig(pr.accounts()[:1], dest)
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	posted := postTars(world, src, "s", 1)
	waitCatalogued(t, st, posted[0].Key())
	ctx := context.Background()
	// The stop comes once the refused send's delivery waits for the flood
	// wait: a send that sits the wait out never gets there.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM waiting_deliveries WHERE opens_at > now() + $1::interval`,
			(sendFloodWait / 2).String()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			d.Kill()
			t.Fatalf("the delivery was never put off by the flood wait (sends made: %d)", world.Calls("a")[tg.MethodSendMessage])
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.Shutdown(context.Background())

	var intents int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE state = 'intent'`).Scan(&intents); err != nil {
		t.Fatal(err)
	}
	if intents != 0 {
		t.Errorf("%d intent(s) left by the stop; want none (the refused send made no message)", intents)
	}
	var queued int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM waiting_deliveries WHERE opens_at > now() + $1::interval`,
		(sendFloodWait / 2).String()).Scan(&queued); err != nil || queued != 1 {
		t.Errorf("deliveries queued behind the flood wait after the stop = %d (%v); want 1", queued, err)
	}

	// The wait has passed (its record, which a restart honours, with it):
	// a restarted daemon sends the package once.
	if _, err := st.Pool().Exec(ctx, `UPDATE waiting_deliveries SET opens_at = now()`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `DELETE FROM flood_waits`); err != nil {
		t.Fatal(err)
	}
	cfg.Registry = prometheus.NewRegistry()
	d = daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	waitHandled(t, st, posted[0].Key())
	checkOnce(t, world, dest, posted)
}

// A flood wait that pauses every request of one account does not hold
// another account's deliveries: b delivers packages of its own source
// while a, which could send to the same destination, waits out an hour's
// pause. Choosing the sender asks a whether it knows b's source (a local
// getChat), and that question must not sit a's pause out (here its bound
// is as long as the pause, so sitting it out never ends within the test).
func TestAccountFloodWaitDoesNotHoldAnotherAccountsPicks(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 24, "a", "b")
	world, dest := pr.world, pr.dest
	d := daemon.New(floodConfig(pr.accounts(), dest), st, pr.dial)
	daemon.SetPickTimeout(d, sendFloodWait)
	prepareAndRun(t, d)
	defer d.Kill()
	daemon.AccountPaced(d, "a").Pause(tg.MethodGetChatHistory, sendFloodWait)

	posted := postTars(world, pr.other, "o", 3)
	waitDocuments(t, world, dest, len(posted))
	checkOnce(t, world, dest, posted)
}

// A package lock is not held across a flood wait that another account
// then waits for: a is paused for an hour while it holds the unique-id
// lock of a file it is about to download, and b, which meets the same
// file in its own source, catalogues it without waiting for a's pause.
func TestFloodWaitUnderAPackageLockDoesNotHoldAnotherAccount(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 26, "a", "b")
	world, src := pr.world, pr.src
	d := daemon.New(floodConfig(pr.accounts(), pr.dest), st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()
	daemon.AccountPaced(d, "a").Pause(tg.MethodGetChatHistory, sendFloodWait)

	first := postTars(world, src, "l", 1)[0]
	uid := first.Document.File.UniqueID
	// b's copy comes once a holds the lock: a lock held across the pause
	// stays (b then waits for it), one let go at the flood wait may be gone
	// before this look sees it, so the look gives up after a while.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		var n int
		if err := st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM package_locks WHERE name = $1`, "u:"+uid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	again := world.Post(pr.other, 0, tgsim.Post{FileName: first.Document.FileName, SameFileAs: uid})
	waitCatalogued(t, st, again.Key())
}

// floodConfig is the configuration of the flood wait tests' daemons:
// accounts sending to dest at 600 a minute, two workers, sets settling
// fast.
func floodConfig(accounts []daemon.Account, dest tg.ChatID) daemon.Config {
	return daemon.Config{
		Accounts:     accounts,
		Destinations: []tg.ChatID{dest}, Workers: 2, DrainTimeout: time.Second, SendRate: 600, Registry: prometheus.NewRegistry(),
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: 5 * time.Second},
	}
}

// An account picked to send for another whose sends a flood wait holds
// may not have seen the part yet: it does not follow the source, and the
// difference its read started comes after the view's settle. The
// delivery is tried again shortly, and that account sends it once its
// view caught up, rather than being put off by the other account's
// hour-long wait.
func TestSpreadToAnAccountWhoseViewLagsWaitsForItNotTheFloodWait(t *testing.T) {
	t.Parallel()
	world := spreadPastALaggingView(t, 27, 800*time.Millisecond, sendFloodWait, 200*time.Millisecond)
	if n := world.Calls("b")[tg.MethodSendMessage]; n != 1 {
		t.Errorf("b made %d sends; want the second package's", n)
	}
}

// The retry of such a delivery comes no later than the picking account's
// wait ends: when the chosen account's view stays behind, the picking
// account sends the package itself once its flood wait (2 s here) has
// passed, however long the delivery stage's retry delay (an hour here).
func TestSpreadToAnAccountThatStaysBehindWaitsNoLongerThanTheFloodWait(t *testing.T) {
	t.Parallel()
	world := spreadPastALaggingView(t, 29, time.Hour, 2*time.Second, time.Hour)
	if n := world.Calls("b")[tg.MethodSendMessage]; n != 0 {
		t.Errorf("b made %d sends; want none, its view never having caught up", n)
	}
}

// spreadPastALaggingView runs accounts a and b, whose sessions fetch a
// chat's difference after difference, with a view settle of 100 ms and a
// delivery retry delay of retry. The first package goes through a (both
// may send, a comes first), b looking at the source (getChat) when a is
// picked: b's view of it stops there. The second goes while a's sends
// wait out a flood wait of flood. It waits for both in the destination,
// once each, and returns the world.
func spreadPastALaggingView(t *testing.T, seed int64, difference, flood, retry time.Duration) *tgsim.World {
	t.Helper()
	st := openStore(t, poolConns)
	pr := newPairOf(t, tgsim.Config{Seed: seed, DifferenceDelay: difference}, "a", "b")
	world, src, dest := pr.world, pr.src, pr.dest
	cfg := floodConfig(pr.accounts(), dest)
	cfg.ViewSettle = 100 * time.Millisecond
	cfg.Delivery.RetryDelay = retry
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	t.Cleanup(d.Kill)

	first := postTars(world, src, "v", 1)
	waitDocuments(t, world, dest, 1)
	world.InjectFloodWait("a", tg.MethodSendMessage, flood, 1)
	second := postTars(world, src, "w", 1)
	waitDocuments(t, world, dest, 2)
	checkOnce(t, world, dest, append(first, second...))
	return world
}
