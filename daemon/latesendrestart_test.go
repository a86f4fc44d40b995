package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/store"
)

// As TestLateSendOfAnAccountAwayIsNotLeftAsASecondCopy, but b's daemon
// restarts after b sent the part, and a's message lands only then: b's new
// run still watches a's token (it took nothing over this time, the
// delivery being its own already), hears of the message and deletes it
// as a second copy.
func TestLateSendOfAnAccountAwayIsWatchedAcrossTheTakersRestart(t *testing.T) {
	t.Parallel()
	testLateSendAcrossTheTakersStop(t, 38, false, false)
}

// As above, but a's message lands while b is down: b's new run opens the
// destination, and TDLib's difference for it tells b's session of the
// message as new.
func TestLateSendOfAnAccountAwayLandingWhileTheTakerIsDown(t *testing.T) {
	t.Parallel()
	testLateSendAcrossTheTakersStop(t, 40, false, true)
}

// As above, but b's lease moves to another instance (b's process dies,
// and a standby instance takes b over once its lease lapses).
func TestLateSendOfAnAccountAwayIsWatchedAfterTheTakersLeaseMoves(t *testing.T) {
	t.Parallel()
	testLateSendAcrossTheTakersStop(t, 39, true, false)
}

func testLateSendAcrossTheTakersStop(t *testing.T, seed int64, moved, landDown bool) {
	ctx := t.Context()
	st := openStore(t, poolConns)
	pr := newPair(t, seed, "a", "b")
	pr.world.SetDeleteRights("b", pr.dest, true)
	posted := handledByAOfItsSource(t, st, pr, "restart", store.OutcomePackage, nil)

	token := sentInFlightByA(t, st, pr, false)
	logOutA(t, st)

	started := make(chan daemon.LeaseEvent, 16)
	cfg := sharedConfig(pr, "b")
	cfg.Instance, cfg.LeaseTTL = "one", 2*time.Second
	cfg.OnLease = func(ev daemon.LeaseEvent) {
		if ev.Kind == "started" {
			started <- ev
		}
	}
	d := runSharingWith(t, st, pr, cfg)
	recorded := waitRecorded(t, st, pr, token)
	if moved {
		d.Kill()
		cfg.Instance = "two"
	} else {
		d.Shutdown(context.Background())
	}
	<-started // the first run's
	land := func() {
		if n := pr.world.LandInFlight(); n != 1 {
			t.Fatalf("a's send in flight: %d requests landed, want 1", n)
		}
	}
	if landDown {
		land()
	}
	d = runSharingWith(t, st, pr, cfg)
	defer d.Shutdown(context.Background())
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("b never started again")
	}
	if !landDown {
		land()
	}
	waitOneCopy(t, st, pr, posted, token)
	if dl, ok, err := st.DeliveryByToken(ctx, token, pr.dest); err != nil || !ok || dl.DestMessageID != recorded {
		t.Fatalf("delivery = %+v, %v, %v; want it recorded with b's copy %d", dl, ok, err, recorded)
	}
}

// runSharingWith starts a daemon of cfg on pr, looking for deliveries of
// accounts away every 50ms.
func runSharingWith(t *testing.T, st *store.Store, pr pair, cfg daemon.Config) *daemon.Daemon {
	t.Helper()
	d := daemon.New(cfg, st, pr.dial)
	daemon.SetSharedInterval(d, 50*time.Millisecond)
	prepareAndRun(t, d)
	return d
}
