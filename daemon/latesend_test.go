package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/ingest"
	"stashd/store"
	"stashd/tg"
)

// Account a's send reached Telegram, and its session closed before the
// message landed (a remote logout right after sendMessage). Account b
// takes a's delivery over, finds nothing in the destination for a's
// intent, and sends the part itself; then a's message lands, carrying
// the same token. b's session is told of it (it follows the destination
// since it read it), and b deletes it as a second copy: the destination
// holds the part once, b's recorded copy.
func TestLateSendOfAnAccountAwayIsNotLeftAsASecondCopy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, poolConns)
	pr := newPair(t, 17, "a", "b")
	pr.world.SetDeleteRights("b", pr.dest, true)
	posted := handledByAOfItsSource(t, st, pr, "inflight", store.OutcomePackage, nil)

	token := sentInFlightByA(t, st, pr, false)
	logOutA(t, st)

	d := runBSharing(t, st, pr)
	defer d.Shutdown(context.Background())
	recorded := waitRecorded(t, st, pr, token)
	if n := pr.world.LandInFlight(); n != 1 {
		t.Fatalf("a's send in flight: %d requests landed, want 1", n)
	}
	waitOneCopy(t, st, pr, posted, token)
	if dl, ok, err := st.DeliveryByToken(ctx, token, pr.dest); err != nil || !ok || dl.DestMessageID != recorded {
		t.Fatalf("delivery = %+v, %v, %v; want it recorded with b's copy %d", dl, ok, err, recorded)
	}
}

// As above, but a's message lands while b's own send of the part is on
// its way: whichever is recorded first is the delivery, and the other is
// deleted, b's own copy too (its record names a's message).
func TestLateSendOfAnAccountAwayLandingDuringTheTakersSend(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 18, "a", "b")
	pr.world.SetDeleteRights("b", pr.dest, true)
	posted := handledByAOfItsSource(t, st, pr, "racing", store.OutcomePackage, nil)

	token := sentInFlightByA(t, st, pr, true)
	logOutA(t, st)

	d := runBSharing(t, st, pr)
	defer d.Shutdown(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for len(pr.world.Sends()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("b never sent the part it took over")
		}
		time.Sleep(5 * time.Millisecond)
	}
	pr.world.HoldInFlight(false)
	// a's message first, then b's: b's session hears of a's post while
	// its own send waits for its outcome.
	if n := pr.world.LandInFlight(); n != 2 {
		t.Fatalf("sends in flight: %d requests landed, want a's and b's", n)
	}
	waitOneCopy(t, st, pr, posted, token)
}

// waitOneCopy waits until the destination holds posted's part once, the
// copy the delivery of token is recorded with, and fails with what it
// holds after thirty seconds.
func waitOneCopy(t *testing.T, st *store.Store, pr pair, posted tg.Message, token string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := documentsIn(pr)
		dl, ok, err := st.DeliveryByToken(t.Context(), token, pr.dest)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 1 && ok && dl.State == store.DeliverySent && left[0].ID == dl.DestMessageID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the destination holds %+v; want only the recorded copy (delivery %+v)", left, dl)
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkOnce(t, pr.world, pr.dest, []tg.Message{posted})
}

// sentInFlightByA has a's delivery stage send its queued delivery, holds
// the send in flight, and closes a's session before it lands (landed by
// World.LandInFlight). With keepHolding the sends that follow are held
// too. It returns the token of a's intent.
func sentInFlightByA(t *testing.T, st *store.Store, pr pair, keepHolding bool) string {
	t.Helper()
	ca := pr.world.Client("a")
	if err := ca.LoadChats(t.Context()); err != nil {
		t.Fatal(err)
	}
	pa := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{pr.dest}}, st,
		tg.NewSession(ca, func(tg.Update) {}), nil)
	pr.world.HoldInFlight(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Its send's outcome never comes: the session closes first.
		_, _ = ingest.NewDeliverer(ingest.DeliveryConfig{RetryDelay: time.Millisecond}, pa, st, nil).RunOnce(t.Context())
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(pr.world.Sends()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a never sent its delivery")
		}
		time.Sleep(5 * time.Millisecond)
	}
	pr.world.HoldInFlight(keepHolding)
	_ = ca.Close()
	<-done
	token := ingest.TokenOf(pr.world.Sends()[0].Caption)
	dl, ok, err := st.DeliveryByToken(t.Context(), token, pr.dest)
	if err != nil || !ok || dl.State != store.DeliveryIntent {
		t.Fatalf("a's delivery = %+v, %v, %v; want its intent left", dl, ok, err)
	}
	return token
}

// waitRecorded waits until the delivery of token is recorded sent, and
// returns the message it names.
func waitRecorded(t *testing.T, st *store.Store, pr pair, token string) tg.MessageID {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		dl, ok, err := st.DeliveryByToken(t.Context(), token, pr.dest)
		if err != nil {
			t.Fatal(err)
		}
		if ok && dl.State == store.DeliverySent {
			return dl.DestMessageID
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery of %s is never recorded: %+v; the destination holds %+v", token, dl, documentsIn(pr))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
