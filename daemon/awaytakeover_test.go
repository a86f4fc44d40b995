package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/store"
)

// Account b takes a's delivery over while b's network is away, and a's
// send lands in the destination meanwhile. b's session answers the
// destination's history from its own database, which learns of a's
// message only from the channel's difference after b is back: b reads
// the destination once that is in, finds a's copy by its token and
// records it, rather than send the part a second time.
func TestTakeoverWhileAwayReadsTheDestinationOnceBack(t *testing.T) {
	t.Parallel()
	const difference = 500 * time.Millisecond
	st := openStore(t, poolConns)
	pr := newPairOf(t, tgsim.Config{Seed: 19, DifferenceDelay: difference}, "a", "b")
	handledByAOfItsSource(t, st, pr, "away", store.OutcomePackage, nil)
	token := sentInFlightByA(t, st, pr, false)

	d := runBSharing(t, st, pr) // the default view settle, 2 s, outlasts the difference
	defer d.Shutdown(context.Background())
	// b opens the destination at its start (its check of the catalogue
	// against it) and a's source and its own to read them. Someone then
	// talks in the destination: b's session, following it, knows its
	// newest message from then on, and answers its history from there.
	for deadline := time.Now().Add(30 * time.Second); pr.world.Calls("b")["openChat"] < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("b opened %d chats, want its source, a's and the destination", pr.world.Calls("b")["openChat"])
		}
	}
	pr.world.Post(pr.dest, 0, tgsim.Post{Text: "hello"})
	time.Sleep(300 * time.Millisecond)
	pr.world.Disconnect("b", 0)
	if n := pr.world.LandInFlight(); n != 1 {
		t.Fatalf("a's send in flight: %d requests landed, want 1", n)
	}
	landed := documentsIn(pr)
	if len(landed) != 1 {
		t.Fatalf("the destination holds %+v once a's send landed, want its copy", landed)
	}
	logOutA(t, st)
	// Longer than a view's settle: a read that did not wait for the
	// connection would have been made, and its send with it.
	time.Sleep(3 * time.Second)
	if n := len(pr.world.Sends()); n != 1 {
		t.Fatalf("%d sends while b was away, want a's alone: b read the destination as its database had it", n)
	}
	pr.world.Reconnect("b")
	if recorded := waitRecorded(t, st, pr, token); recorded != landed[0].ID {
		t.Errorf("the delivery is recorded with message %d, want a's copy %d", recorded, landed[0].ID)
	}
	if sends := pr.world.Sends(); len(sends) != 1 {
		t.Errorf("%d sends, want a's alone: b sent the part again (destination %+v)", len(sends), documentsIn(pr))
	}
}
