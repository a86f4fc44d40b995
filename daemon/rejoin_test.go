package daemon_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"stashd/catchup"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/store"
	"stashd/tg"
)

// An archive an account could not fetch because it had been removed from
// its source is exhausted as a no_access dead letter: no retry of that
// account reads it while it is out. Once the account is a member again,
// with no other account to take the source over, the letter is due once
// more and the archive is catalogued and delivered, with no operator's
// retry: the watermark is past it and the rescan passes over its message
// as handled, so nothing else would fetch it.
func TestRejoinedAccountFetchesWhatItsLostAccessExhausted(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 21, "a")
	posted := exhaustedForLostAccess(t, st, pr, "rejoin")

	// The daemon runs while a is still out: catch-up records the loss.
	d := runAAlone(t, st, pr)
	defer d.Shutdown(context.Background())
	waitAccess(t, st, pr.src, store.AccessLost)

	pr.world.RemoveMember("a", pr.src, false)
	// A catch-up scan reads the source again.
	waitAccess(t, st, pr.src, store.AccessOK, store.AccessNotMember)
	waitFetched(t, st, posted.Key(), "the archive a could not read while removed was never fetched once it was back")
	waitDocuments(t, pr.world, pr.dest, 1)
}

// The same when the account is back before any catch-up recorded the
// loss: the failed fetch alone said the source could not be read, and
// the next start finds it readable.
func TestAccountBackBeforeItsLossWasRecordedFetchesWhatItExhausted(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 22, "a")
	posted := exhaustedForLostAccess(t, st, pr, "early")
	pr.world.RemoveMember("a", pr.src, false)

	d := runAAlone(t, st, pr)
	defer d.Shutdown(context.Background())
	waitFetched(t, st, posted.Key(), "the archive a could not read while removed was never fetched once it was back")
	waitDocuments(t, pr.world, pr.dest, 1)
}

// TDLib tells the account's return (updateSupergroup, or for a basic
// group updateBasicGroup, with the status member, while the daemon runs,
// or as it loads its chats at the next start): the source is read again
// at once, not when the circuit its loss opened closes (an hour here), and
// recorded readable as a member's, not as a public chat read from outside.
func TestRejoinedAccountIsReadAgainWithoutWaitingForItsCircuit(t *testing.T) {
	t.Parallel()
	for i, c := range []struct {
		name    string
		kind    tg.ChatKind
		stopped bool
	}{
		{"back while running", tg.KindChannel, false},
		{"back while stopped", tg.KindChannel, true},
		{"basic group, back while running", tg.KindBasicGroup, false},
		{"basic group, back while stopped", tg.KindBasicGroup, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := openStore(t, poolConns)
			pr := newPair(t, int64(23+i), "a")
			if c.kind != tg.KindChannel {
				pr.src = pr.world.AddChat(c.kind, "club", "a", "b")
			}
			posted := exhaustedForLostAccess(t, st, pr, "circuit")
			policy := store.ScanPolicy{CircuitBase: time.Hour, MaxDelay: 6 * time.Hour}
			d := runAAloneWith(t, st, pr, policy)
			waitCircuitOpen(t, st, pr.src)
			if c.stopped {
				d.Shutdown(context.Background())
			}
			pr.world.RemoveMember("a", pr.src, false)
			if c.stopped {
				d = runAAloneWith(t, st, pr, policy)
			}
			defer d.Shutdown(context.Background())
			waitAccess(t, st, pr.src, store.AccessOK)
			waitFetched(t, st, posted.Key(), "the archive a could not read while removed was not fetched once TDLib said it was back")
			waitDocuments(t, pr.world, pr.dest, 1)
		})
	}
}

// TDLib tells the account's removal from a basic group source
// (updateBasicGroup with the status banned) as it tells one from a
// channel: catch-up's next cycle reads the chat from the server, which
// refuses, and records the source inaccessible at once, although
// getChat still answers from the session's local view and no read of
// the daemon's own failed.
func TestRemovalFromABasicGroupIsRecordedFromTheReport(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 27, "a")
	pr.src = pr.world.AddChat(tg.KindBasicGroup, "club", "a", "b")
	d := runAAloneWith(t, st, pr, store.ScanPolicy{CircuitBase: time.Hour, MaxDelay: 6 * time.Hour})
	defer d.Shutdown(context.Background())
	postTars(pr.world, pr.src, "club", 1)
	waitDocuments(t, pr.world, pr.dest, 1)
	pr.world.RemoveMember("a", pr.src, true)
	waitAccess(t, st, pr.src, store.AccessLost)
}

// waitCircuitOpen waits, bounded, until a catch-up scan of chat failed for
// want of access and opened its circuit for more than half an hour.
func waitCircuitOpen(t *testing.T, st *store.Store, chat tg.ChatID) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		src, err := st.GetSource(t.Context(), chat)
		if err != nil {
			t.Fatal(err)
		}
		if src.Access == store.AccessLost && time.Until(src.CircuitUntil) > 30*time.Minute {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("source %+v: want it inaccessible, its circuit open for about an hour", src)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exhaustedForLostAccess posts one archive to pr's source, recorded as
// a's, has a's pipeline handle it after a was removed from the chat,
// and checks that it is an exhausted no_access letter the watermark
// passed. a stays removed.
func exhaustedForLostAccess(t *testing.T, st *store.Store, pr pair, stem string) tg.Message {
	t.Helper()
	posted := handledByAOfItsSource(t, st, pr, stem, store.OutcomeDeadLetter,
		func(tg.Message) { pr.world.RemoveMember("a", pr.src, true) })
	letters, err := st.DeadLetters(t.Context(), store.DeadExhausted, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || letters[0].Key != posted.Key() || letters[0].ErrorClass != store.ClassNoAccess || letters[0].Account != "a" {
		t.Fatalf("exhausted letters %+v, want a's no_access letter of %s", letters, posted.Key())
	}
	return posted
}

// runAAlone starts a daemon in which only account a of pr runs, reading
// pr's source, with short catch-up, circuit and retry intervals.
func runAAlone(t *testing.T, st *store.Store, pr pair) *daemon.Daemon {
	t.Helper()
	return runAAloneWith(t, st, pr, store.ScanPolicy{CircuitBase: 100 * time.Millisecond, MaxDelay: 200 * time.Millisecond})
}

// runAAloneWith is runAAlone with catch-up's scan policy p.
func runAAloneWith(t *testing.T, st *store.Store, pr pair, p store.ScanPolicy) *daemon.Daemon {
	t.Helper()
	cfg := daemon.Config{
		Accounts:     []daemon.Account{{Name: "a", Sources: []tg.ChatID{pr.src}}},
		Destinations: []tg.ChatID{pr.dest}, Workers: 2, DrainTimeout: 5 * time.Second,
		Ingest:   ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		Catchup:  catchup.Config{Interval: 50 * time.Millisecond, Policy: p},
		Delivery: ingest.DeliveryConfig{Interval: 50 * time.Millisecond},
		Retry:    ingest.RetryConfig{Interval: 50 * time.Millisecond},
	}
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	return d
}

// waitAccess waits, bounded, until chat's access is recorded as one of
// want.
func waitAccess(t *testing.T, st *store.Store, chat tg.ChatID, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		src, err := st.GetSource(t.Context(), chat)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(want, src.Access) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("source %d's access is %q, want one of %q", chat, src.Access, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
