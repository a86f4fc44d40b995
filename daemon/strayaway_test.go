package daemon_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"stashd/ingest"
	"stashd/store"
	"stashd/tg"
)

// lateAnswer is a session whose send lands in the destination while its
// outcome comes too late for the Send waiting for it (tg.ErrSendTimeout):
// landed gets the message.
type lateAnswer struct {
	*tg.Session
	landed *tg.Message
}

func (s lateAnswer) SendTo(ctx context.Context, chat tg.ChatID, thread int64, remoteFileID, caption string) (tg.Message, error) {
	m, err := s.Session.SendTo(ctx, chat, thread, remoteFileID, caption)
	if err != nil {
		return m, err
	}
	*s.landed = m
	return tg.Message{}, fmt.Errorf("send to %d: %w", chat, tg.ErrSendTimeout)
}

// aloneOfA is account a of pr alone, outside any daemon: a pipeline on a
// session of its own, whose sends go through wrap.
func aloneOfA(t *testing.T, st *store.Store, pr pair, wrap func(*tg.Session) ingest.Telegram) *ingest.Pipeline {
	t.Helper()
	ca := pr.world.Client("a")
	t.Cleanup(func() { _ = ca.Close() })
	if err := ca.LoadChats(t.Context()); err != nil {
		t.Fatal(err)
	}
	var tel ingest.Telegram = tg.NewSession(ca, func(tg.Update) {})
	if wrap != nil {
		tel = wrap(tel.(*tg.Session))
	}
	return ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{pr.dest}}, st, tel, nil)
}

// deliverAsA runs one pass of a's delivery stage, its failures retried at
// once.
func deliverAsA(t *testing.T, st *store.Store, pa *ingest.Pipeline) ingest.DeliveryResult {
	t.Helper()
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{RetryDelay: time.Millisecond}, pa, st, nil).RunOnce(t.Context())
	if err != nil {
		t.Fatalf("a's delivery stage: %v", err)
	}
	return res
}

// noteForA notes m, a send of account a, as a's stopping recorder notes a
// send it could not settle.
func noteForA(t *testing.T, st *store.Store, m tg.Message) {
	t.Helper()
	if err := st.NoteStraySends(t.Context(), store.StraySend{Destination: m.ChatID, Message: m.ID,
		Token: ingest.TokenOf(m.Caption), Account: "a"}); err != nil {
		t.Fatal(err)
	}
}

// logOutA records account a as logged out remotely.
func logOutA(t *testing.T, st *store.Store) {
	t.Helper()
	if _, err := st.SetAccountAuth(t.Context(), store.AccountAuth{Account: "a", LoggedIn: false, State: "closed",
		Reason: "logged out", Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// waitNotesSettled waits until no note of a's sends is left, and fails
// with the destination's documents after thirty seconds.
func waitNotesSettled(t *testing.T, st *store.Store, pr pair) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, err := st.StraySends(t.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's notes %+v are never settled; the destination holds %+v", left, documentsIn(pr))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// documentsIn returns the documents pr's destination holds.
func documentsIn(pr pair) []tg.Message {
	var out []tg.Message
	for _, m := range pr.world.Messages(pr.dest) {
		if m.Document != nil {
			out = append(out, m)
		}
	}
	return out
}

// Account a's send landed, but its outcome came after a's wait for it had
// ended, and a, logged out right after, noted it unsettled. Account b,
// which reads the source and posts in the destination, takes a's
// deliveries over: the package is delivered, by a's message, which b
// recognises by its token and does not send again, and a's note is
// settled rather than left for an account that will not run.
func TestUnsettledSendOfAnAccountAwayIsNeitherLostNorSentTwice(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, poolConns)
	pr := newPair(t, 15, "a", "b")
	posted := handledByAOfItsSource(t, st, pr, "late", store.OutcomePackage, nil)

	var landed tg.Message
	pa := aloneOfA(t, st, pr, func(s *tg.Session) ingest.Telegram { return lateAnswer{Session: s, landed: &landed} })
	if res := deliverAsA(t, st, pa); res.Deferred != 1 || landed.ID == 0 {
		t.Fatalf("a's delivery: %+v, message %d; want its send landed and the delivery deferred", res, landed.ID)
	}
	noteForA(t, st, landed)
	logOutA(t, st)

	d := runBSharing(t, st, pr)
	defer d.Shutdown(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := st.QueuedDeliveries(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			wb, _ := st.AllWaiting(ctx, "b")
			t.Fatalf("the delivery never left the queue: b's queue %+v", wb)
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkOnce(t, pr.world, pr.dest, []tg.Message{posted})
	dl, ok, err := st.DeliveryByToken(ctx, ingest.TokenOf(landed.Caption), pr.dest)
	if err != nil || !ok || dl.State != store.DeliverySent || dl.DestMessageID != landed.ID {
		t.Fatalf("delivery = %+v, %v, %v; want it recorded sent with a's message %d", dl, ok, err, landed.ID)
	}
	waitNotesSettled(t, st, pr)
}

// Account a delivered a package, then found a second copy of it in the
// destination (its TDLib re-sent an old pending send) and could not
// delete it (a 500, twice): it noted the copy, and no longer runs. Account
// b, which reads the source and posts in the destination with the right
// to delete others' messages there, settles a's note: the second copy
// goes, the delivered one stays.
func TestSecondCopyNotedByAnAccountAwayIsDeleted(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 16, "a", "b")
	pr.world.SetDeleteRights("b", pr.dest, true)
	posted := handledByAOfItsSource(t, st, pr, "twice", store.OutcomePackage, nil)

	first := deliveredAndCopiedByA(t, st, pr, posted)

	d := runBSharing(t, st, pr)
	defer d.Shutdown(context.Background())
	waitNotesSettled(t, st, pr)
	left := documentsIn(pr)
	if len(left) != 1 || left[0].ID != first.ID {
		t.Fatalf("the destination holds %+v; want only the delivered copy %d", left, first.ID)
	}
}

// Account a, logged out, noted a second copy that account b, which takes
// its deliveries, has no right to delete. b tries once, and leaves the
// note for a: it does not ask Telegram to delete the copy again (and log
// its failure) at every look at a's queue, for as long as a stays logged
// out.
func TestNoteAnAccountAwayCannotSettleIsTriedOncePerAbsence(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 16, "a", "b")
	posted := handledByAOfItsSource(t, st, pr, "stuck", store.OutcomePackage, nil)

	deliveredAndCopiedByA(t, st, pr, posted)
	logOutA(t, st)

	d := runBSharing(t, st, pr)
	defer d.Shutdown(context.Background())
	deletes := func() int { return pr.world.Calls("b")[tg.MethodDeleteMessages] }
	deadline := time.Now().Add(30 * time.Second)
	for deletes() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("b never tried to settle a's note")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Twenty more looks at a's queue (every 50ms).
	time.Sleep(time.Second)
	if n := deletes(); n != 1 {
		t.Errorf("b asked to delete a's noted copy %d times, want once while a stays logged out", n)
	}
	left, err := st.StraySends(t.Context(), "a")
	if err != nil || len(left) != 1 {
		t.Fatalf("a's notes %+v, %v; want the note left for a", left, err)
	}
	if got := len(documentsIn(pr)); got != 2 {
		t.Fatalf("the destination holds %d documents, want both copies", got)
	}
}

// deliveredAndCopiedByA delivers posted as a, then sends a second copy of
// it to the destination on a session of its own (as a's TDLib re-sending
// an old pending send would) and notes that copy for a to settle. It
// returns the delivered copy.
func deliveredAndCopiedByA(t *testing.T, st *store.Store, pr pair, posted tg.Message) tg.Message {
	t.Helper()
	pa := aloneOfA(t, st, pr, nil)
	if res := deliverAsA(t, st, pa); res.Delivered != 1 {
		t.Fatalf("a's delivery: %+v; want it sent", res)
	}
	first := documentsIn(pr)[0]
	cb := pr.world.Client("a")
	defer cb.Close()
	if err := cb.LoadChats(t.Context()); err != nil {
		t.Fatal(err)
	}
	view, err := cb.GetMessage(t.Context(), posted.ChatID, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	second, err := tg.NewSession(cb, func(tg.Update) {}).Send(t.Context(), pr.dest, view.Document.File.RemoteID, first.Caption)
	if err != nil {
		t.Fatal(err)
	}
	noteForA(t, st, second)
	return first
}
