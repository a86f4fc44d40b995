package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// documents returns the documents the destination holds.
func (e *env) documents() []tg.Message {
	var out []tg.Message
	for _, m := range e.world.Messages(e.dest) {
		if m.Document != nil {
			out = append(out, m)
		}
	}
	return out
}

// pausedSender is instance A's session: before its send goes out, before
// runs (A is paused past its lease meanwhile); from then on the lease gate
// refuses its deletions.
type pausedSender struct {
	*tg.Session
	before func()
	gated  *atomic.Bool
}

func (s pausedSender) SendTo(ctx context.Context, chat tg.ChatID, thread int64, remoteFileID, caption string) (tg.Message, error) {
	s.before()
	s.gated.Store(true)
	return s.Session.SendTo(ctx, chat, thread, remoteFileID, caption)
}

func (s pausedSender) DeleteMessages(ctx context.Context, chat tg.ChatID, ids []tg.MessageID, revoke bool) error {
	if s.gated.Load() {
		return fmt.Errorf("deleteMessages: %w", tg.ErrLeaseLost)
	}
	return s.Session.DeleteMessages(ctx, chat, ids, revoke)
}

// slowRecorder is instance B's session: its send lands, then its answer
// waits for release before B records it.
type slowRecorder struct {
	*tg.Session
	landed  chan struct{}
	release chan struct{}
}

func (s slowRecorder) SendTo(ctx context.Context, chat tg.ChatID, thread int64, remoteFileID, caption string) (tg.Message, error) {
	m, err := s.Session.SendTo(ctx, chat, thread, remoteFileID, caption)
	close(s.landed)
	<-s.release
	return m, err
}

// Instance A's send is on its way when A loses the account (paused past
// its lease); B takes the account and the delivery's lock over, finds no
// copy in the destination and sends the part again. A's message lands
// too. A cannot settle it: either its record is refused (B had not
// recorded yet: the fence), or it finds B's record and its deletion of its
// own copy is refused (the lease gate). A notes it, and B, settling the
// account's notes, deletes it: the part is in the destination once.
func TestSendLandedAfterTheLeaseMovedOnIsSettled(t *testing.T) {
	t.Parallel()
	for _, bRecordsFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("B records first %v", bRecordsFirst), func(t *testing.T) {
			t.Parallel()
			e := newEnvWorld(t, tgsim.Config{Seed: 48}, "a")
			epoch := func(n int64) {
				if _, err := e.st.Pool().Exec(e.ctx, `INSERT INTO accounts (name, lease_epoch) VALUES ('a', $1)
					ON CONFLICT (name) DO UPDATE SET lease_epoch = excluded.lease_epoch`, n); err != nil {
					t.Error(err)
				}
			}
			epoch(1)
			asB := store.WithFence(e.ctx, "a", 2, nil)
			landed, release := make(chan struct{}), make(chan struct{})
			pb, _, _ := e.pipelineWith("a", nil, func(s *tg.Session) ingest.Telegram {
				if bRecordsFirst {
					return s
				}
				return slowRecorder{Session: s, landed: landed, release: release}
			})
			type result struct {
				res ingest.DeliveryResult
				err error
			}
			bDone := make(chan result, 1)
			pa, ca, _ := e.pipelineWith("a", nil, func(s *tg.Session) ingest.Telegram {
				return pausedSender{Session: s, gated: new(atomic.Bool), before: func() {
					// A's lease and the delivery's lock lapse; B takes
					// both over and sends, before A's message lands.
					epoch(2)
					if _, err := e.st.Pool().Exec(e.ctx, `UPDATE package_locks SET until = now() - interval '1 second'`); err != nil {
						t.Error(err)
					}
					go func() {
						res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, pb, e.st, nil).RunOnce(asB)
						bDone <- result{res, err}
					}()
					if bRecordsFirst {
						b := <-bDone
						bDone <- b
					} else {
						<-landed
					}
				}}
			})
			queueArchives(t, e, pa, ca, 1, "late")
			_, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, pa, e.st, nil).RunOnce(store.WithFence(e.ctx, "a", 1, nil))
			if !bRecordsFirst && !errors.Is(err, store.ErrStaleEpoch) {
				t.Fatalf("A's delivery: %v; want its record refused (stale epoch)", err)
			}
			close(release)
			if b := <-bDone; b.err != nil || b.res.Delivered != 1 {
				t.Fatalf("B's delivery: %+v, %v; want it sent", b.res, b.err)
			}
			if n := len(e.documents()); n != 2 {
				t.Fatalf("destination holds %d copies, want A's and B's", n)
			}
			n, err := pb.SettleStrays(asB)
			if err != nil || n != 1 {
				t.Fatalf("settled %d, %v; want A's send", n, err)
			}
			left := e.documents()
			if len(left) != 1 {
				t.Fatalf("destination holds %d copies after the settling, want 1", len(left))
			}
			d, ok, err := e.st.DeliveryByToken(e.ctx, ingest.TokenOf(left[0].Caption), e.dest)
			if err != nil || !ok || d.State != store.DeliverySent || d.DestMessageID != left[0].ID {
				t.Fatalf("delivery = %+v, %v, %v; want it recorded with the message left (%d)", d, ok, err, left[0].ID)
			}
			if n, err := pb.SettleStrays(asB); err != nil || n != 0 {
				t.Fatalf("settled again %d, %v; want nothing left", n, err)
			}
		})
	}
}

// A note whose settling fails for a reason that may pass (a 500, twice)
// stays for the next settling; the notes after it are settled all the
// same. Past StrayPatience it is given up, not tried for ever.
func TestStrayThatFailsToSettleWaitsForTheNextTry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	var copies []tg.Message
	for i := range 3 {
		posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("n%d.tar", i),
			Data: archivetest.Tar([]archivetest.File{{Name: "n", Data: []byte{byte(i)}}})})
		mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
		e.deliver()
		var first tg.Message
		for _, m := range e.documents() {
			if m.Document.File.UniqueID == posted.Document.File.UniqueID {
				first = m
			}
		}
		copies = append(copies, e.sendCopy("a", posted, first.Caption))
	}
	for _, m := range copies[:2] {
		if err := e.st.NoteStraySends(e.ctx, store.StraySend{Destination: e.dest, Message: m.ID, Token: ingest.TokenOf(m.Caption), Account: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	// The first note's deletion fails, and its one retry too.
	e.world.InjectError("a", tg.MethodDeleteMessages, &tg.Error{Code: 500, Message: "INTERNAL"}, 2)
	n, err := p.SettleStrays(e.ctx)
	if n != 1 || err == nil {
		t.Fatalf("settled %d, %v; want the second note settled and the first one's failure", n, err)
	}
	if got := len(e.documents()); got != 5 {
		t.Fatalf("destination holds %d documents, want 5 (one copy of three deleted)", got)
	}
	if n, err := p.SettleStrays(e.ctx); n != 1 || err != nil {
		t.Fatalf("settled %d, %v on the next try; want the first note", n, err)
	}
	if got := len(e.documents()); got != 4 {
		t.Fatalf("destination holds %d documents, want the three deliveries and the copy not noted yet", got)
	}
	// Past StrayPatience a note that still fails is given up.
	last := copies[2]
	if err := e.st.NoteStraySends(e.ctx, store.StraySend{Destination: e.dest, Message: last.ID, Token: ingest.TokenOf(last.Caption), Account: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Pool().Exec(e.ctx, `UPDATE stray_sends SET noted_at = now() - interval '25 hours'`); err != nil {
		t.Fatal(err)
	}
	e.world.InjectError("a", tg.MethodDeleteMessages, &tg.Error{Code: 500, Message: "INTERNAL"}, 2)
	if n, err := p.SettleStrays(e.ctx); n != 0 || err != nil {
		t.Fatalf("settled %d, %v past its patience; want the note given up, no failure", n, err)
	}
	if left, err := e.st.StraySends(e.ctx, "a"); err != nil || len(left) != 0 {
		t.Fatalf("notes left: %+v, %v; want the overdue one forgotten", left, err)
	}
	if got := len(e.documents()); got != 4 {
		t.Fatalf("destination holds %d documents, want the overdue copy left", got)
	}
}

// A rewind lost a delivery's row; its reconciliation kept the first copy
// for the file and noted the second copy it could not delete. Settling
// the note deletes it: the kept copy is the delivery's record.
func TestStrayOfALostDeliveryIsDeletedByItsKeptCopy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "lost.tar",
		Data: archivetest.Tar([]archivetest.File{{Name: "l", Data: []byte("lost")}})})
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	e.deliver()
	docs := e.documents()
	if len(docs) != 1 {
		t.Fatalf("destination holds %d documents, want the delivery", len(docs))
	}
	first := docs[0]
	second := e.sendCopy("a", posted, first.Caption)
	token := ingest.TokenOf(first.Caption)
	if _, err := e.st.Pool().Exec(e.ctx, `DELETE FROM deliveries`); err != nil {
		t.Fatal(err)
	}
	if rec, err := e.st.RecordCopy(e.ctx, store.CopyFound{Destination: e.dest, Message: first.ID, Token: token,
		UniqueID: posted.Document.File.UniqueID}); err != nil || rec.Outcome != store.CopyKept {
		t.Fatalf("keep the first copy: %+v, %v", rec, err)
	}
	if err := e.st.NoteStraySends(e.ctx, store.StraySend{Destination: e.dest, Message: second.ID, Token: token, Account: "a"}); err != nil {
		t.Fatal(err)
	}
	if n, err := p.SettleStrays(e.ctx); n != 1 || err != nil {
		t.Fatalf("settled %d, %v; want the note", n, err)
	}
	if docs := e.documents(); len(docs) != 1 || docs[0].ID != first.ID {
		t.Fatalf("destination holds %v, want only the kept copy %v", docs, first.ID)
	}
}

// A noted copy whose recorded copy a reader's admin deleted meanwhile is
// the part's only copy: settling the note leaves it, for a delivery whose
// row stands and for one whose row a rewind lost.
func TestStrayWhoseRecordedCopyIsGoneStays(t *testing.T) {
	t.Parallel()
	for i, rowLost := range []bool{false, true} {
		e := newEnv(t, "a")
		p, c := e.pipeline("a")
		posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("gone%d.tar", i),
			Data: archivetest.Tar([]archivetest.File{{Name: "g", Data: []byte{byte(i)}}})})
		mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
		e.deliver()
		first := e.documents()[0]
		second := e.sendCopy("a", posted, first.Caption)
		token := ingest.TokenOf(first.Caption)
		if rowLost {
			if _, err := e.st.Pool().Exec(e.ctx, `DELETE FROM deliveries`); err != nil {
				t.Fatal(err)
			}
			if _, err := e.st.RecordCopy(e.ctx, store.CopyFound{Destination: e.dest, Message: first.ID, Token: token,
				UniqueID: posted.Document.File.UniqueID}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.st.NoteStraySends(e.ctx, store.StraySend{Destination: e.dest, Message: second.ID, Token: token, Account: "a"}); err != nil {
			t.Fatal(err)
		}
		e.world.Delete(e.dest, first.ID)
		if n, err := p.SettleStrays(e.ctx); n != 1 || err != nil {
			t.Fatalf("row lost %v: settled %d, %v; want the note settled", rowLost, n, err)
		}
		if docs := e.documents(); len(docs) != 1 || docs[0].ID != second.ID {
			t.Errorf("row lost %v: destination holds %v; want the noted copy %v, the part's only one", rowLost, docs, second.ID)
		}
	}
}

// deliveredWithCopy catalogues and delivers one tar posted in account a's
// source, then sends a second copy of it to the destination; it returns
// the delivered copy, the second one and the posted message.
func deliveredWithCopy(t *testing.T, e *env, p *ingest.Pipeline, c *tgsim.Client, name string) (first, second, posted tg.Message) {
	t.Helper()
	posted = e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name,
		Data: archivetest.Tar([]archivetest.File{{Name: "f", Data: []byte(name)}})})
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	e.deliver()
	first = e.documents()[0]
	return first, e.sendCopy("a", posted, first.Caption), posted
}

// A reader's admin replaced the recorded copy's media in the destination,
// which the session does not follow, so its database still holds the old
// file: settling opens the chat before it reads, finds the recorded copy
// carries another file, and leaves the noted copy, the one message left
// with the part's file.
func TestStrayWhoseRecordedCopyWasEditedStays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	first, second, posted := deliveredWithCopy(t, e, p, c, "edited.tar")
	if err := e.st.NoteStraySends(e.ctx, store.StraySend{Destination: e.dest, Message: second.ID, Token: ingest.TokenOf(first.Caption), Account: "a"}); err != nil {
		t.Fatal(err)
	}
	e.world.EditMessageMedia(e.dest, first.ID, tgsim.Post{FileName: "other.bin", Data: []byte("other")})
	if n, err := p.SettleStrays(e.ctx); n != 1 || err != nil {
		t.Fatalf("settled %d, %v; want the note settled", n, err)
	}
	carrying := 0
	for _, m := range e.documents() {
		if m.Document.File.UniqueID == posted.Document.File.UniqueID {
			carrying++
		}
	}
	if carrying != 1 {
		t.Errorf("%d messages in the destination carry the part's file, want the noted copy", carrying)
	}
}

// A second copy this session reports whose reads fail is noted for the
// account's owner, as a failed deletion is: nothing else would settle it.
// Settling, a read that fails for a reason that may pass keeps the note;
// one that will not (the account lost the destination) drops it.
func TestStrayReadFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	_, second, _ := deliveredWithCopy(t, e, p, c, "reads.tar")
	e.world.InjectError("a", tg.MethodGetMessage, &tg.Error{Code: 500, Message: "INTERNAL"}, 1)
	if _, err := p.RecordSend(e.ctx, second); err == nil {
		t.Fatal("RecordSend with its read failing: no error")
	}
	notes, err := e.st.StraySends(e.ctx, "a")
	if err != nil || len(notes) != 1 || notes[0].Message != second.ID {
		t.Fatalf("notes after the read failed: %+v, %v; want the second copy", notes, err)
	}
	e.world.InjectError("a", tg.MethodGetMessage, &tg.Error{Code: 500, Message: "INTERNAL"}, 1)
	if n, err := p.SettleStrays(e.ctx); n != 0 || err == nil {
		t.Fatalf("settled %d, %v with the read failing; want the failure, the note kept", n, err)
	}
	if notes, _ := e.st.StraySends(e.ctx, "a"); len(notes) != 1 {
		t.Fatalf("%d notes after a read that may pass failed, want 1", len(notes))
	}
	e.world.InjectError("a", tg.MethodGetMessage, &tg.Error{Code: 403, Message: "CHANNEL_PRIVATE"}, 1)
	if n, err := p.SettleStrays(e.ctx); n != 1 || err != nil {
		t.Fatalf("settled %d, %v with the destination lost; want the note dropped", n, err)
	}
	if notes, _ := e.st.StraySends(e.ctx, "a"); len(notes) != 0 {
		t.Fatalf("%d notes after the destination was lost, want none", len(notes))
	}
	if got := len(e.documents()); got != 2 {
		t.Errorf("destination holds %d documents, want both copies (nothing deleted on a failed read)", got)
	}
}

// Account a's noted second copy, a away, is settled by account b through
// b's own session, which never followed the destination while a posted
// there: only the notes to the destinations b is given, and a copy b may
// not delete (another sender's, without the right) is left noted for a,
// not dropped. Given the right, b deletes it.
func TestStrayOfAnAccountAwaySettledByAnother(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a", "b")
	pb, _ := e.pipeline("b")
	p, c := e.pipeline("a")
	first, second, _ := deliveredWithCopy(t, e, p, c, "away.tar")
	if err := e.st.NoteStraySends(e.ctx, store.StraySend{Destination: e.dest, Message: second.ID, Token: ingest.TokenOf(first.Caption), Account: "a"}); err != nil {
		t.Fatal(err)
	}
	notes := func() int {
		t.Helper()
		left, err := e.st.StraySends(e.ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		return len(left)
	}
	if n, err := pb.SettleStraysOf(e.ctx, "a", []tg.ChatID{e.src["b"]}); n != 0 || err != nil || notes() != 1 {
		t.Fatalf("settled %d, %v for another destination, %d notes left; want the note untouched", n, err, notes())
	}
	if n, err := pb.SettleStraysOf(e.ctx, "a", []tg.ChatID{e.dest}); n != 0 || err != nil || notes() != 1 {
		t.Fatalf("settled %d, %v without the right to delete a's copy, %d notes left; want the note left for a", n, err, notes())
	}
	if got := len(e.documents()); got != 2 {
		t.Fatalf("destination holds %d documents, want both copies", got)
	}
	e.world.SetDeleteRights("b", e.dest, true)
	if n, err := pb.SettleStraysOf(e.ctx, "a", []tg.ChatID{e.dest}); n != 1 || err != nil || notes() != 0 {
		t.Fatalf("settled %d, %v with the right, %d notes left; want the note settled", n, err, notes())
	}
	if docs := e.documents(); len(docs) != 1 || docs[0].ID != first.ID {
		t.Fatalf("destination holds %v, want only the delivered copy %v", docs, first.ID)
	}
}
