package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// queueArchives posts n lone archives in account a's source and hands
// them to p, which queues their deliveries.
func queueArchives(t *testing.T, e *env, p *ingest.Pipeline, c *tgsim.Client, n int, tag string) {
	t.Helper()
	for i := range n {
		files := []archivetest.File{{Name: "a.txt", Data: fmt.Appendf(nil, "%s %d", tag, i)}}
		posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("%s%d.tar", tag, i), Data: archivetest.Tar(files)})
		mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	}
}

// intentsAndLocks counts the delivery rows still intents and the package
// locks held.
func intentsAndLocks(t *testing.T, e *env) (intents, locks int) {
	t.Helper()
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT (SELECT count(*) FROM deliveries WHERE state = 'intent'),
		(SELECT count(*) FROM package_locks)`).Scan(&intents, &locks); err != nil {
		t.Fatal(err)
	}
	return intents, locks
}

// A delivery whose intent was written ahead, with its lock, in the round
// trip that recorded the delivery before it, and which then sends nothing
// (its destination held by the time its turn comes) drops that intent
// when it lets its lock go: kept, it would make the next attempt search
// the destination for a token no message carries.
func TestSkippedDeliveryDropsItsIntentWrittenAhead(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 43}, "a")
	p, c := e.pipeline("a")
	queueArchives(t, e, p, c, 3, "skip")
	asked := 0
	var aheadSeen int
	hold := func(context.Context, tg.ChatID, bool, int64) (bool, error) {
		asked++
		if asked == 2 {
			// The first delivery's record wrote this one's intent.
			aheadSeen, _ = intentsAndLocks(t, e)
			return true, nil
		}
		return false, nil
	}
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{Hold: hold}, p, e.st, nil).RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Delivered != 1 || res.Held != 2 {
		t.Fatalf("run: %+v; want one delivered, then the destination held", res)
	}
	if aheadSeen != 1 {
		t.Fatalf("%d intents before the second delivery's send, want its own, written ahead", aheadSeen)
	}
	if intents, locks := intentsAndLocks(t, e); intents != 0 || locks != 0 {
		t.Fatalf("%d intents and %d locks left after the held delivery, want none", intents, locks)
	}
	if got := len(e.world.Messages(e.dest)); got != 1 {
		t.Fatalf("destination holds %d messages, want 1", got)
	}
}

// A stop while a delivery waits for its send turn, its intent written
// ahead, leaves no intent: the next run sends it without searching the
// destination.
func TestStopWaitingForTheTurnDropsTheIntentWrittenAhead(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 44}, "a")
	// One send a minute: the second delivery waits for its turn.
	p, c, _ := e.pipelineWith("a", nil, func(s *tg.Session) ingest.Telegram {
		s.Budget = tg.NewSendBudget(tg.SendBudgetConfig{Account: "a", PerMinute: 1, Jitter: -1}, nil)
		return s
	})
	queueArchives(t, e, p, c, 2, "stop")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(ctx)
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var sent, intents int
		if err := e.st.Pool().QueryRow(e.ctx, `SELECT count(*) FILTER (WHERE state = 'sent'), count(*) FILTER (WHERE state = 'intent')
			FROM deliveries`).Scan(&sent, &intents); err != nil {
			t.Fatal(err)
		}
		if sent == 1 && intents == 1 {
			break // the second delivery waits for its turn, its intent written
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sent and %d intents: the second delivery's intent was not written ahead", sent, intents)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the delivery stage did not stop")
	}
	if intents, locks := intentsAndLocks(t, e); intents != 0 || locks != 0 {
		t.Fatalf("%d intents and %d locks left after the stop, want none", intents, locks)
	}
	if got := len(e.world.Messages(e.dest)); got != 1 {
		t.Fatalf("destination holds %d messages, want 1", got)
	}
}

// lockTakenMidSend is a session whose sends find the delivery's lock taken
// over by another holder (its lease lapsed while the send was on its way).
type lockTakenMidSend struct {
	*tg.Session
	take func()
}

func (s lockTakenMidSend) SendTo(ctx context.Context, chat tg.ChatID, thread int64, remoteFileID, caption string) (tg.Message, error) {
	s.take()
	return s.Session.SendTo(ctx, chat, thread, remoteFileID, caption)
}

// A refused send drops its fresh intent only while the delivery's lock is
// still its own: a holder that took the lock over meanwhile may be sending
// that intent, and the record of its send needs the row (without it, the
// part would be sent again, a second copy).
func TestRefusedSendKeepsTheIntentOfALockTakenOver(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 45}, "a")
	p, c, _ := e.pipelineWith("a", nil, func(s *tg.Session) ingest.Telegram {
		return lockTakenMidSend{Session: s, take: func() {
			if _, err := e.st.Pool().Exec(e.ctx, `UPDATE package_locks SET owner = 'another instance'`); err != nil {
				t.Error(err)
			}
		}}
	})
	queueArchives(t, e, p, c, 1, "taken")
	e.world.InjectSendFailures("a", true)
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deferred != 1 || res.Delivered != 0 {
		t.Fatalf("run: %+v; want the refused delivery deferred", res)
	}
	if intents, locks := intentsAndLocks(t, e); intents != 1 || locks != 1 {
		t.Fatalf("%d intents and %d locks after the refusal under a lock taken over, want the new holder's intent and lock", intents, locks)
	}
}

// The same refusal under the delivery's own lock drops the intent: the
// next attempt sends afresh, without searching the destination.
func TestRefusedSendDropsItsIntent(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 46}, "a")
	p, c := e.pipeline("a")
	queueArchives(t, e, p, c, 1, "refused")
	e.world.InjectSendFailures("a", true)
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deferred != 1 {
		t.Fatalf("run: %+v; want the refused delivery deferred", res)
	}
	if intents, locks := intentsAndLocks(t, e); intents != 0 || locks != 0 {
		t.Fatalf("%d intents and %d locks after the refusal, want none", intents, locks)
	}
}

// A delivery that fails for good leaves the queue only while its lock is
// its own: a holder that took the lock over may have sent some of it, and
// the rest needs the queue row. It is then not counted as given up.
func TestDeliveryGivenUpUnderALockTakenOverStaysQueued(t *testing.T) {
	t.Parallel()
	for _, takenOver := range []bool{false, true} {
		t.Run(fmt.Sprintf("taken over %v", takenOver), func(t *testing.T) {
			t.Parallel()
			e := newEnvWorld(t, tgsim.Config{Seed: 47}, "a")
			p, c, _ := e.pipelineWith("a", nil, func(s *tg.Session) ingest.Telegram {
				return lockTakenMidSend{Session: s, take: func() {
					if !takenOver {
						return
					}
					if _, err := e.st.Pool().Exec(e.ctx, `UPDATE package_locks SET owner = 'another instance'`); err != nil {
						t.Error(err)
					}
				}}
			})
			queueArchives(t, e, p, c, 1, "gone")
			e.world.InjectError("a", tg.MethodSendMessage, &tg.Error{Code: 400, Message: "MEDIA_INVALID"}, 1)
			res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Under a lock taken over the delivery is the new holder's:
			// not given up, left queued (and put off, as after any lock
			// lost).
			if !takenOver && res.Failed != 1 || takenOver && (res.Failed != 0 || res.Deferred != 1) {
				t.Fatalf("run: %+v; want the delivery given up, unless its lock was taken over", res)
			}
			want := 0
			if takenOver {
				want = 1
			}
			if n, err := e.st.QueuedDeliveries(e.ctx, ""); err != nil || n != want {
				t.Fatalf("%d deliveries queued after the give-up (%v), want %d", n, err, want)
			}
		})
	}
}
