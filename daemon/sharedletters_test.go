package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/ingest"
	"stashd/store"
	"stashd/tg"
)

// A source taken over from an account that no longer reads it takes its
// pending dead letters with it: the retry loop that fetches them is the
// new account's, and a letter left with the old account would wait for a
// retry loop that never runs (an account no longer configured, logged
// out, or gone) while the rescan passes over its message as handled.
func TestTakenOverSourceRetriesItsDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, poolConns)
	pr := newPair(t, 9, "a", "b")
	posted := postTars(pr.world, pr.src, "failed", 1)[0]

	// Account a read the source and recorded the archive as a dead letter
	// due for a retry, then left the configuration.
	sourceOfA(t, st, pr)
	letter := store.DeadLetter{Key: posted.Key(), Account: "a", ErrorClass: string(tg.ClassRetryable),
		Reason: "download stalled", NextAttemptAt: time.Now().Add(-time.Second)}
	if err := st.RecordDeadLetter(ctx, letter, store.SourceMessage{FileName: posted.Document.FileName,
		FileSize: posted.Document.File.Size, UniqueID: posted.Document.File.UniqueID}); err != nil {
		t.Fatal(err)
	}
	watermarkPast(t, st, pr, posted)

	d := runBRetrying(t, st, pr)
	defer d.Shutdown(context.Background())
	if src, err := st.GetSource(ctx, pr.src); err != nil || src.Account != "b" {
		t.Fatalf("the source is recorded for %q (%v), want b, which took it over", src.Account, err)
	}

	waitFetched(t, st, posted.Key(), "the dead letter of the taken-over source was never retried")
}

// An archive whose fetch failed because the account recorded for its
// source had lost access to the chat is exhausted as a dead letter: no
// retry by that account could read it. Once another account that reads
// the chat takes the source over, the letter is that account's to fetch
// again, or the archive is never catalogued: the watermark is past it
// and the rescan passes over its message as handled.
func TestTakenOverSourceRetriesWhatItsLostAccessExhausted(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 10, "a", "b")
	// Account a saw the archive, then was removed from the chat before it
	// fetched it: its pipeline records the failure.
	posted := handledByAOfItsSource(t, st, pr, "cut", store.OutcomeDeadLetter, func(tg.Message) { pr.world.RemoveMember("a", pr.src, true) })

	d := runBRetrying(t, st, pr)
	defer d.Shutdown(context.Background())

	waitFetched(t, st, posted.Key(), "the archive a could no longer read was never fetched by b, which took its source over")
}

// A package an account catalogued and queued for delivery waits for that
// account's delivery stage. Once the account no longer runs (never
// started again, logged out, or gone from every configuration) and
// another account that reads the package's source and posts in its
// destination runs, the delivery is that account's: it reaches the
// destination instead of waiting for ever.
func TestDeliveriesOfAnAccountAwayAreSentByOneThatRuns(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 11, "a", "b")
	// Account a catalogued the archive and queued its delivery, and has
	// not run since.
	handledByAOfItsSource(t, st, pr, "queued", store.OutcomePackage, nil)

	d := runBSharing(t, st, pr)
	defer d.Shutdown(context.Background())
	waitDocuments(t, pr.world, pr.dest, 1)
}

// A delivery taken from an account away by one that then finds it cannot
// read the source after all (removed from the chat it lists) is not given
// up as a delivery of a source lost to every account: the account away
// may read it on its return. It waits, handed over.
func TestDeliveriesTakenFromAnAccountAwayWaitWhenUnreadable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, poolConns)
	pr := newPair(t, 12, "a", "b")
	handledByAOfItsSource(t, st, pr, "kept", store.OutcomePackage, nil)
	pr.world.RemoveMember("b", pr.src, true)

	d := runBSharing(t, st, pr)
	defer d.Shutdown(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ws, err := st.AllWaiting(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == 1 && ws[0].Attempts > 0 {
			return // taken, tried, and waiting
		}
		time.Sleep(20 * time.Millisecond)
	}
	wa, _ := st.AllWaiting(ctx, "a")
	wb, _ := st.AllWaiting(ctx, "b")
	t.Fatalf("the delivery taken from a is not waiting with b after a failed try: a %+v, b %+v; destination %+v", wa, wb, pr.world.Messages(pr.dest))
}

// The account a source was taken from may still hold some of its messages
// in its queue, and fail them for want of access after the move: those
// dead letters are the source's new account's to fetch, not the failing
// one's, whose retries could never read them.
func TestLettersOfASourceTakenOverMeanwhileGoToItsAccount(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, poolConns)
	pr := newPair(t, 13, "a", "b")
	// b has taken the source over; a, removed from the chat, handles a
	// message it had queued before.
	posted := handledByA(t, st, pr, "late", store.OutcomeDeadLetter, func(posted tg.Message) {
		if err := st.EnsureSource(ctx, store.Source{ChatID: pr.src, Account: "b", Kind: tg.KindChannel, Title: "news",
			Watermark: posted.ID.ServerID()}); err != nil {
			t.Fatal(err)
		}
		pr.world.RemoveMember("a", pr.src, true)
	})

	d := runBRetrying(t, st, pr)
	defer d.Shutdown(context.Background())
	waitFetched(t, st, posted.Key(), "the archive a failed after b took its source over was never fetched by b")
}

// handledByA posts one archive named after stem to pr's source, seen by
// account a, runs before (when not nil) with the message once a holds it, then
// has a's own pipeline handle it, wanting outcome want. a does not run
// afterwards.
func handledByA(t *testing.T, st *store.Store, pr pair, stem string, want store.Outcome, before func(tg.Message)) tg.Message {
	t.Helper()
	ctx := t.Context()
	ca := pr.world.Client("a")
	defer ca.Close()
	if err := ca.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	posted := postTars(pr.world, pr.src, stem, 1)[0]
	m, err := ca.GetMessage(ctx, pr.src, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(posted)
	}
	pa := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{pr.dest}}, st,
		tg.NewSession(ca, func(tg.Update) {}), nil)
	if out, err := pa.Process(ctx, m); err != nil || out != want {
		t.Fatalf("a's handling = %q, %v; want %q", out, err, want)
	}
	return posted
}

// sourceOfA records pr's source as account a's.
func sourceOfA(t *testing.T, st *store.Store, pr pair) {
	t.Helper()
	if err := st.EnsureSource(t.Context(), store.Source{ChatID: pr.src, Account: "a", Kind: tg.KindChannel, Title: "news"}); err != nil {
		t.Fatal(err)
	}
}

// watermarkPast advances the watermark of pr's source to posted.
func watermarkPast(t *testing.T, st *store.Store, pr pair, posted tg.Message) {
	t.Helper()
	if err := st.AdvanceWatermark(t.Context(), pr.src, posted.ID.ServerID()); err != nil {
		t.Fatal(err)
	}
}

// runBRetrying starts a daemon in which only account b of pr runs,
// retrying dead letters every 50ms.
func runBRetrying(t *testing.T, st *store.Store, pr pair) *daemon.Daemon {
	t.Helper()
	cfg := sharedConfig(pr, "b")
	cfg.Retry = ingest.RetryConfig{Interval: 50 * time.Millisecond}
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	return d
}

// runBSharing starts a daemon in which only account b of pr runs, looking
// for deliveries of accounts away every 50ms.
func runBSharing(t *testing.T, st *store.Store, pr pair) *daemon.Daemon {
	t.Helper()
	d := daemon.New(sharedConfig(pr, "b"), st, pr.dial)
	daemon.SetSharedInterval(d, 50*time.Millisecond)
	prepareAndRun(t, d)
	return d
}

// handledByAOfItsSource records pr's source as a's, has a handle one
// archive there (handledByA) and advances the source's watermark past it.
func handledByAOfItsSource(t *testing.T, st *store.Store, pr pair, stem string, want store.Outcome, before func(tg.Message)) tg.Message {
	t.Helper()
	sourceOfA(t, st, pr)
	posted := handledByA(t, st, pr, stem, want, before)
	watermarkPast(t, st, pr, posted)
	return posted
}

// waitFetched waits until key's message is handled as other than a dead
// letter or a pending part, and fails with what, and the dead letters,
// after ten seconds.
func waitFetched(t *testing.T, st *store.Store, key tg.MessageKey, what string) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, ok, err := st.MessageHandled(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if ok && out != store.OutcomeDeadLetter && out != store.OutcomePartPending {
			return
		}
		if time.Now().After(deadline) {
			var letters []store.DeadLetter
			for _, s := range []store.DeadLetterState{store.DeadPending, store.DeadExhausted} {
				l, _ := st.DeadLetters(ctx, s, 10)
				letters = append(letters, l...)
			}
			t.Fatalf("%s: outcome %q; letters %+v", what, out, letters)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An account logged out may still run and be handed deliveries: one queued
// for it after another account's last look at its queue is taken at the
// next look all the same.
func TestDeliveriesQueuedLaterForALoggedOutAccountAreTaken(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, poolConns)
	pr := newPair(t, 14, "a", "b")
	handledByAOfItsSource(t, st, pr, "later", store.OutcomePackage, nil)
	// The delivery is hidden from b (from a chat b does not list) while b
	// first looks at a's queue.
	if _, err := st.Pool().Exec(ctx, `UPDATE waiting_deliveries SET source_chat_id = -source_chat_id`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetAccountAuth(ctx, store.AccountAuth{Account: "a", LoggedIn: false, State: "closed",
		Reason: "logged out", Since: time.Now()}); err != nil {
		t.Fatal(err)
	}

	d := runBSharing(t, st, pr)
	defer d.Shutdown(context.Background())
	time.Sleep(300 * time.Millisecond) // b looks at a's empty queue
	if _, err := st.Pool().Exec(ctx, `UPDATE waiting_deliveries SET source_chat_id = -source_chat_id`); err != nil {
		t.Fatal(err)
	}
	waitDocuments(t, pr.world, pr.dest, 1)
}
