package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// instance is one daemon instance running account "a" on its own TDLib
// database directory: a session whose unclaimed sends feed a SendRecorder,
// and whose deletions in the destination are signalled.
type instance struct {
	c       *tgsim.Client
	p       *ingest.Pipeline
	m       *ingest.Metrics
	deleted chan tg.MessagesDeleted
}

func (e *env) instance(dir string, logs *lockedBuffer) *instance {
	e.t.Helper()
	in := &instance{deleted: make(chan tg.MessagesDeleted, 16)}
	unclaimed := ingest.NewUnclaimedSends()
	// ClientIn re-sends what a closed client on dir left pending at once;
	// the session's pump queues the outcome until the recorder reads it.
	in.c = e.world.ClientIn("a", dir)
	e.t.Cleanup(func() { _ = in.c.Close() })
	sess := tg.NewSession(in.c, func(u tg.Update) {
		switch u := u.(type) {
		case tg.SendSucceeded:
			unclaimed.Push(u.Message)
		case tg.MessagesDeleted:
			if u.Chat == e.dest {
				in.deleted <- u
			}
		}
	})
	if err := in.c.LoadChats(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	in.m = ingest.NewMetrics(prometheus.NewRegistry())
	in.p = ingest.NewPipeline(ingest.Config{
		Account: "a", Destinations: []tg.ChatID{e.dest}, RetryBase: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	}, e.st, sess, in.m)
	e.pipes = append(e.pipes, in.p)
	rec := ingest.NewSendRecorder(in.p, unclaimed)
	if err := rec.Start(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(rec.Stop)
	return in
}

// copiesOf returns the destination's documents carrying uid.
func (e *env) copiesOf(uid string) []tg.Message {
	var out []tg.Message
	for _, m := range e.delivered() {
		if m.Document.File.UniqueID == uid {
			out = append(out, m)
		}
	}
	return out
}

// pendingThenSentElsewhere posts an archive whose send by instance A
// stays pending in A's TDLib directory ("a") when A's process dies; then
// instance B takes the account over on its own directory ("b"), finds
// nothing carrying the token, sends the part and records its message, and
// stops. It returns the part's file, of which the destination holds one
// copy.
func pendingThenSentElsewhere(t *testing.T, e *env, logs *lockedBuffer) (uid string) {
	t.Helper()
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "twice.tar", Data: archivetest.Tar([]archivetest.File{{Name: "t", Data: []byte("t")}})})
	e.world.HoldSends(true)
	crashOn(t, e, e.world.ClientIn("a", "a"), posted)
	e.world.HoldSends(false)

	b := e.instance("b", logs)
	mustHandle(t, b.p, e.view(b.c, posted), store.OutcomeDuplicate)
	e.deliver()
	uid = posted.Document.File.UniqueID
	if n := len(e.copiesOf(uid)); n != 1 {
		t.Fatalf("destination holds %d copies after B's send, want 1", n)
	}
	if err := b.c.Close(); err != nil {
		t.Fatal(err)
	}
	return uid
}

// Instance A sends a part and stops before the send lands; instance B,
// on another database directory, reconciles, finds nothing and sends the
// part itself. When A runs the account again, its TDLib re-sends the old
// pending message: that second copy is deleted, and the delivery keeps
// pointing at B's message, the one left.
func TestResentCopyOfDeliveredPartIsDeleted(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1, ResendAfterRestart: true}, "a")
	logs := &lockedBuffer{}
	uid := pendingThenSentElsewhere(t, e, logs)
	first := e.copiesOf(uid)
	tok := ingest.TokenOf(first[0].Caption)

	// A gets the account back: its TDLib re-sends the pending message.
	a := e.instance("a", logs)
	select {
	case u := <-a.deleted:
		if len(u.IDs) != 1 || u.IDs[0] == first[0].ID {
			t.Errorf("deleted %v, want the re-sent copy (not %d)", u.IDs, first[0].ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the re-sent copy was never deleted; destination holds %d copies", len(e.copiesOf(uid)))
	}
	if got := e.world.SendStats().Resent; got != 1 {
		t.Fatalf("%d sends re-sent, want 1", got)
	}
	left := e.copiesOf(uid)
	if len(left) != 1 || left[0].ID != first[0].ID {
		t.Fatalf("destination holds %v, want only B's message %d", left, first[0].ID)
	}
	d, ok, err := e.st.DeliveryByToken(e.ctx, tok, e.dest)
	if err != nil || !ok || d.State != store.DeliverySent || d.DestMessageID != left[0].ID {
		t.Fatalf("delivery = %+v, %v, %v; want sent as message %d", d, ok, err, left[0].ID)
	}
	// The deletion's update can reach the session before the recorder has
	// counted and logged it.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if testutil.ToFloat64(a.m.CopiesDeleted("a")) >= 1 && strings.Contains(logs.String(), "second copies of a delivered part deleted") {
			break
		}
	}
	if got := testutil.ToFloat64(a.m.CopiesDeleted("a")); got != 1 {
		t.Errorf("stashd_duplicate_copies_deleted_total = %v, want 1", got)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "second copies of a delivered part deleted") {
		t.Errorf("no warning about the deleted copy in the log:\n%s", out)
	}
}

// sendCopy sends, as account, the document of posted to the destination
// with caption, on a client of its own, and waits until it has landed.
func (e *env) sendCopy(account string, posted tg.Message, caption string) tg.Message {
	e.t.Helper()
	c := e.world.Client(account)
	defer c.Close()
	if err := c.LoadChats(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	s := tg.NewSession(c, func(tg.Update) {})
	m, err := s.Send(e.ctx, e.dest, e.view(c, posted).Document.File.RemoteID, caption)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// Reconciliation that finds the token twice in the destination keeps the
// oldest message as the delivery and deletes the other.
func TestReconcileKeepsOldestOfTwoCopies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "two.tar", Data: archivetest.Tar([]archivetest.File{{Name: "2", Data: []byte("2")}})})
	uid := posted.Document.File.UniqueID
	crashMidSend(t, e, posted)
	first := e.copiesOf(uid)[0]
	second := e.sendCopy("a", posted, first.Caption)

	p, c, m := e.pipelineWith("a", nil, nil)
	mustHandle(t, p, e.view(c, posted), store.OutcomeDuplicate)
	e.deliver()
	left := e.copiesOf(uid)
	if len(left) != 1 || left[0].ID != first.ID {
		t.Fatalf("destination holds %v, want only the oldest copy %d (not %d)", left, first.ID, second.ID)
	}
	d, ok, err := e.st.DeliveryByToken(e.ctx, ingest.TokenOf(first.Caption), e.dest)
	if err != nil || !ok || d.DestMessageID != first.ID {
		t.Fatalf("delivery = %+v, %v, %v; want message %d", d, ok, err, first.ID)
	}
	calls := e.world.Calls("a")
	if calls[tg.MethodDeleteMessages] != 1 || calls[tg.MethodSendMessage] != 2 {
		t.Errorf("deleteMessages %d, sendMessage %d; want 1 and 2 (the crashed send and the copy)", calls[tg.MethodDeleteMessages], calls[tg.MethodSendMessage])
	}
	if got := testutil.ToFloat64(m.CopiesDeleted("a")); got != 1 {
		t.Errorf("stashd_duplicate_copies_deleted_total = %v, want 1", got)
	}
}

// recordedMeanwhile is a catalogue whose first MarkSent runs before first:
// another session recording the same delivery between this session's read
// of the destination and its own record.
type recordedMeanwhile struct {
	ingest.Store
	once   sync.Once
	before func(d store.Delivery)
}

func (s *recordedMeanwhile) MarkSent(ctx context.Context, d store.Delivery, m tg.MessageID) (tg.MessageID, error) {
	s.once.Do(func() { s.before(d) })
	return s.Store.MarkSent(ctx, d, m)
}

// Reconciliation finds the part in the destination and records it, but
// another session recorded the delivery meanwhile with a copy of its own,
// which an admin deleted since. The copy found is the part's only one: it
// is no second copy, and stays.
func TestFoundCopyStaysWhenTheRecordedOneIsGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "gone.tar", Data: archivetest.Tar([]archivetest.File{{Name: "g", Data: []byte("g")}})})
	uid := posted.Document.File.UniqueID
	crashMidSend(t, e, posted)
	first := e.copiesOf(uid)[0]
	var other tg.Message
	e.wrapStore = func(st ingest.Store) ingest.Store {
		return &recordedMeanwhile{Store: st, before: func(d store.Delivery) {
			other = e.sendCopy("a", posted, first.Caption)
			if _, err := e.st.MarkSent(e.ctx, d, other.ID); err != nil {
				t.Error(err)
			}
			e.world.Delete(e.dest, other.ID)
		}}
	}
	p, c, _ := e.pipelineWith("a", nil, nil)
	mustHandle(t, p, e.view(c, posted), store.OutcomeDuplicate)
	e.deliver()
	if other.ID == 0 {
		t.Fatal("the delivery was never recorded by reconciliation")
	}
	if left := e.copiesOf(uid); len(left) != 1 || left[0].ID != first.ID {
		t.Fatalf("destination holds %v, want the copy found (%d), the part's only one", left, first.ID)
	}
	if calls := e.world.Calls("a")[tg.MethodDeleteMessages]; calls != 0 {
		t.Errorf("%d deleteMessages calls, want none", calls)
	}
}

// A copy the account may not delete (another account sent it, and this
// one has no right to delete messages there) stays: the delivery is
// reconciled all the same and the failure is logged as an error.
func TestCopyThatCannotBeDeletedIsLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a", "b")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "stuck.tar", Data: archivetest.Tar([]archivetest.File{{Name: "s", Data: []byte("s")}})})
	e.world.Join("b", e.src["a"])
	uid := posted.Document.File.UniqueID
	crashMidSend(t, e, posted)
	first := e.copiesOf(uid)[0]
	e.sendCopy("b", posted, first.Caption)

	logs := &lockedBuffer{}
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Logger = slog.New(slog.NewTextHandler(logs, nil)) }, nil)
	mustHandle(t, p, e.view(c, posted), store.OutcomeDuplicate)
	e.deliver()
	if got := len(e.copiesOf(uid)); got != 2 {
		t.Errorf("destination holds %d copies, want 2 (the other account's copy cannot be deleted)", got)
	}
	d, ok, err := e.st.DeliveryByToken(e.ctx, ingest.TokenOf(first.Caption), e.dest)
	if err != nil || !ok || d.DestMessageID != first.ID {
		t.Fatalf("delivery = %+v, %v, %v; want message %d", d, ok, err, first.ID)
	}
	if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "Message can't be deleted") {
		t.Errorf("no error about the copy left in the log:\n%s", out)
	}
}

// A retryable failure of the deletion (a 500) is tried once more; a second
// one leaves the copy, noted for the account's owner, whose next settling
// of the notes deletes it.
func TestCopyDeletionRetriesOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		failures int
		left     int
	}{{1, 1}, {2, 2}} {
		e := newEnv(t, "a")
		posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "retry.tar", Data: archivetest.Tar([]archivetest.File{{Name: "r", Data: []byte("r")}})})
		uid := posted.Document.File.UniqueID
		crashMidSend(t, e, posted)
		first := e.copiesOf(uid)[0]
		e.sendCopy("a", posted, first.Caption)
		e.world.InjectError("a", tg.MethodDeleteMessages, &tg.Error{Code: 500, Message: "INTERNAL"}, tc.failures)

		logs := &lockedBuffer{}
		p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Logger = slog.New(slog.NewTextHandler(logs, nil)) }, nil)
		mustHandle(t, p, e.view(c, posted), store.OutcomeDuplicate)
		e.deliver()
		if got := len(e.copiesOf(uid)); got != tc.left {
			t.Errorf("%d failures: destination holds %d copies, want %d", tc.failures, got, tc.left)
		}
		if got := e.world.Calls("a")[tg.MethodDeleteMessages]; got != 2 {
			t.Errorf("%d failures: deleteMessages called %d times, want 2", tc.failures, got)
		}
		if noted := strings.Contains(logs.String(), "noted for the account's owner"); noted != (tc.left > 1) {
			t.Errorf("%d failures: copy noted = %v:\n%s", tc.failures, noted, logs.String())
		}
		n, err := p.SettleStrays(e.ctx)
		if err != nil || n != tc.left-1 {
			t.Errorf("%d failures: settled %d, %v; want %d", tc.failures, n, err, tc.left-1)
		}
		if got := len(e.copiesOf(uid)); got != 1 {
			t.Errorf("%d failures: destination holds %d copies after the settling, want 1", tc.failures, got)
		}
	}
}

// flakyStrayStore fails the first failRecord MarkSentByToken and the
// first failNote NoteStraySends, as writes cut off by a database blip.
type flakyStrayStore struct {
	ingest.Store
	failRecord, failNote atomic.Int32
}

func (s *flakyStrayStore) MarkSentByToken(ctx context.Context, token string, dest tg.ChatID, msg tg.MessageID, account string) (bool, error) {
	if s.failRecord.Add(-1) >= 0 {
		return false, errors.New("connection reset by peer")
	}
	return s.Store.MarkSentByToken(ctx, token, dest, msg, account)
}

func (s *flakyStrayStore) NoteStraySends(ctx context.Context, strays ...store.StraySend) error {
	if s.failNote.Add(-1) >= 0 {
		return errors.New("connection reset by peer")
	}
	return s.Store.NoteStraySends(ctx, strays...)
}

// The second copy of TestResentCopyOfDeliveredPartIsDeleted, when the
// write that would record it fails, or its deletion meets a flood wait:
// its delivery is recorded already, so nothing but this session's report
// would ever find it. It is noted for the account's owner and deleted
// when the notes are settled; when the note fails too, the recorder tries
// again until it settles it.
func TestResentCopyWhoseRecordFailsIsStillDeleted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		record, noting int32
		deleteFlood    bool
	}{{"record fails", 1, 0, false}, {"record and note fail", 2, 1, false}, {"deletion flood-waits and note fails", 0, 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvWorld(t, tgsim.Config{Seed: 1, ResendAfterRestart: true}, "a")
			logs := &lockedBuffer{}
			uid := pendingThenSentElsewhere(t, e, logs)
			if tc.deleteFlood {
				e.world.InjectFloodWait("a", tg.MethodDeleteMessages, time.Second, 1)
			}

			// A runs the account again; its TDLib re-sends the old
			// pending message, and the recorder's writes fail.
			unclaimed := ingest.NewUnclaimedSends()
			ca := e.world.ClientIn("a", "a")
			t.Cleanup(func() { _ = ca.Close() })
			sess := tg.NewSession(ca, func(u tg.Update) {
				if s, ok := u.(tg.SendSucceeded); ok {
					unclaimed.Push(s.Message)
				}
			})
			if err := ca.LoadChats(e.ctx); err != nil {
				t.Fatal(err)
			}
			flaky := &flakyStrayStore{Store: e.st}
			flaky.failRecord.Store(tc.record)
			flaky.failNote.Store(tc.noting)
			pa := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{e.dest}, RetryBase: time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(logs, nil))}, flaky, sess, nil)
			e.pipes = append(e.pipes, pa)
			rec := ingest.NewSendRecorder(pa, unclaimed)
			rec.RetryBase = 10 * time.Millisecond
			if err := rec.Start(e.ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rec.Stop)
			// What the daemon runs meanwhile: the delivery stage, which
			// settles the account's noted sends first.
			deadline := time.Now().Add(10 * time.Second)
			for len(e.copiesOf(uid)) != 1 || flaky.failRecord.Load() >= 0 || flaky.failNote.Load() >= 0 {
				if time.Now().After(deadline) {
					t.Fatalf("destination holds %d copies of the part; want 1\nlog:\n%s", len(e.copiesOf(uid)), logs.String())
				}
				if _, err := pa.SettleStrays(e.ctx); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if n := len(e.copiesOf(uid)); n != 1 {
				t.Fatalf("destination holds %d copies, want 1", n)
			}
		})
	}
}

// unreachableStrayStore is a database that no longer answers: its writes
// fail once their context ends.
type unreachableStrayStore struct {
	ingest.Store
}

func (s *unreachableStrayStore) MarkSentByToken(ctx context.Context, token string, dest tg.ChatID, msg tg.MessageID, account string) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

func (s *unreachableStrayStore) NoteStraySends(ctx context.Context, strays ...store.StraySend) error {
	<-ctx.Done()
	return ctx.Err()
}

// A recorder stopped with sends queued and the database unreachable notes
// them all in one write, bounded like any note (10 s): its stop does not
// wait that long for each.
func TestRecorderStopNotesWhatIsLeftAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1}, "a")
	c := e.world.Client("a")
	t.Cleanup(func() { _ = c.Close() })
	pa := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{e.dest}}, &unreachableStrayStore{Store: e.st},
		tg.NewSession(c, func(tg.Update) {}), nil)
	q := ingest.NewUnclaimedSends()
	for i := range 5 {
		q.Push(tg.Message{ChatID: e.dest, ID: tg.MessageIDFromServer(int64(10 + i)), Caption: "x\n" + ingest.TokenPrefix + fmt.Sprint("tok", i)})
	}
	rec := ingest.NewSendRecorder(pa, q)
	if err := rec.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	rec.Stop()
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the recorder's Stop took %s with 5 sends queued and the database unreachable; want one note's bound", took)
	}
}

// A send the session reports after the recorder stopped (the session's
// pump runs until its client is closed) is noted by NoteLeft, which the
// account's stop calls once the session is done.
func TestSendOfferedAfterTheRecorderStoppedIsNoted(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1}, "a")
	c := e.world.Client("a")
	t.Cleanup(func() { _ = c.Close() })
	pa := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{e.dest}}, e.st,
		tg.NewSession(c, func(tg.Update) {}), nil)
	q := ingest.NewUnclaimedSends()
	rec := ingest.NewSendRecorder(pa, q)
	ctx, cancel := context.WithCancel(context.Background())
	if err := rec.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	rec.Stop()
	q.Push(tg.Message{ChatID: e.dest, ID: tg.MessageIDFromServer(77), Caption: "x\n" + ingest.TokenPrefix + "afterstop"})
	rec.NoteLeft()
	strays, err := e.st.StraySends(e.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(strays) != 1 || strays[0].Token != "afterstop" || strays[0].Message != tg.MessageIDFromServer(77) {
		t.Fatalf("noted %+v; want the send offered after the stop", strays)
	}
}
