package ingest_test

import (
	"errors"
	"testing"
	"time"

	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// A dead letter another instance recorded is retried by an instance whose
// session did not follow the source meanwhile: TDLib answers its
// getMessage with a 404 until the chat's difference is in (a too new
// message not from update). The retry must not record the message as
// deleted at source, never to be retried.
func TestRetryOfAMessageTheSessionDoesNotKnowYet(t *testing.T) {
	t.Parallel()
	e, p2, c2, posted := letterOfAnotherInstance(t)
	src := e.src["a"]
	if err := c2.OpenChat(e.ctx, src); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.NewRetrier(ingest.RetryConfig{}, p2, e.st, nil).RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	counts, err := e.st.DeadLetterCounts(e.ctx)
	if err != nil || counts[store.DeadDeleted] != 0 {
		t.Fatalf("dead letters by state = %v, %v; want none deleted at source", counts, err)
	}
	if out, ok, err := e.st.MessageHandled(e.ctx, tg.MessageKey{Chat: src, Message: posted.ID}); err != nil || !ok || out != store.OutcomePackage {
		t.Errorf("message handled as %q (%v, %v), want catalogued by the retry", out, ok, err)
	}
}

// The same retry by an instance whose session followed the source long
// since, made right after the session came back from an outage during
// which the message was posted: the chat's difference for the outage
// comes after the session is ready, and until then TDLib answers 404. The
// view counts as current by time, so only the chat's last message, as the
// session knows it, tells that the 404 proves nothing: the letter must
// stay pending, and the retry after the difference catalogues the message.
func TestRetryRightAfterAReconnect(t *testing.T) {
	t.Parallel()
	const delay = time.Second // the retry must come before the difference, on a loaded machine too
	e := newEnvWorld(t, tgsim.Config{Seed: 1, DifferenceDelay: delay}, "a")
	src := e.src["a"]
	var views *tg.Views
	p2, c2 := e.pipelineInWith("a", "instance-2", func(cfg *ingest.Config, sess *tg.Session) {
		views = tg.NewViews(sess.OpenChat, 10*time.Millisecond)
		cfg.Views = views
	})
	if _, err := c2.GetChat(e.ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := views.Current(e.ctx, src); err != nil {
		t.Fatal(err)
	}
	time.Sleep(delay + 100*time.Millisecond) // the open's own difference

	p1, c1 := e.pipeline("a")
	e.world.Disconnect("a", 0)
	raw := e.world.Post(src, 0, tgsim.Post{FileName: "flaky.tar", Data: tarOf("a", "flaky")})
	e.world.Reconnect("a")
	// c1 reads the message from the server; instance 2's session learns
	// of it only with the difference, delay after the reconnect.
	posted := e.view(c1, raw)
	if err := p1.DeadLetter(e.ctx, posted, errors.New("download stalled")); err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(24 * time.Hour)
	r := ingest.NewRetrier(ingest.RetryConfig{}, p2, e.st, nil)
	if _, err := r.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	letters, err := e.st.DeadLetters(e.ctx, "", 10)
	if err != nil || len(letters) != 1 || letters[0].State != store.DeadPending || letters[0].ErrorClass != "unconfirmed_deletion" {
		t.Fatalf("dead letters %+v (%v) after a retry before the difference; want one pending, unconfirmed_deletion", letters, err)
	}
	time.Sleep(delay + 100*time.Millisecond)
	e.now = e.now.Add(24 * time.Hour)
	if _, err := r.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	if out, ok, err := e.st.MessageHandled(e.ctx, posted.Key()); err != nil || !ok || out != store.OutcomePackage {
		t.Errorf("message handled as %q (%v, %v), want catalogued by the retry after the difference", out, ok, err)
	}
}

// A message posted and deleted while the retrying instance's session did
// not follow the chat is newer than anything that session knows: each
// retry's 404 proves nothing, until the letter's last attempt, which takes
// it as the deletion it is rather than leave an exhausted letter for an
// operator.
func TestUnconfirmedDeletionEndsDeletedAtTheLastAttempt(t *testing.T) {
	t.Parallel()
	e := sourceSeenByInstance2(t)
	src := e.src["a"]
	p1, c1 := e.pipeline("a")
	posted := e.view(c1, e.world.Post(src, 0, tgsim.Post{FileName: "gone.tar", Data: tarOf("a", "gone")}))
	if err := p1.DeadLetter(e.ctx, posted, errors.New("download stalled")); err != nil {
		t.Fatal(err)
	}
	e.world.Delete(src, posted.ID)
	p2, _ := e.pipelineInWith("a", "instance-2", func(cfg *ingest.Config, _ *tg.Session) { cfg.DeadLetterAttempts = 3 })
	r := ingest.NewRetrier(ingest.RetryConfig{}, p2, e.st, nil)
	for i, want := range []store.DeadLetterState{store.DeadPending, store.DeadDeleted} {
		e.now = e.now.Add(24 * time.Hour)
		if _, err := r.RunOnce(e.ctx); err != nil {
			t.Fatal(err)
		}
		letters, err := e.st.DeadLetters(e.ctx, "", 10)
		if err != nil || len(letters) != 1 || letters[0].State != want {
			t.Fatalf("retry %d: dead letters %+v (%v); want one %s", i+1, letters, err, want)
		}
	}
}

// The same retry while the chat cannot be opened (openChat fails): the
// 404 proves nothing, so the letter stays pending, and the next retry,
// with the chat open, catalogues the message.
func TestRetryWhileTheChatCannotBeOpenedKeepsTheLetter(t *testing.T) {
	t.Parallel()
	e, p2, _, posted := letterOfAnotherInstance(t)
	e.world.InjectError("a", tg.MethodOpenChat, &tg.Error{Code: 500, Message: "INTERNAL"}, 1)
	r := ingest.NewRetrier(ingest.RetryConfig{}, p2, e.st, nil)
	if _, err := r.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	letters, err := e.st.DeadLetters(e.ctx, "", 10)
	if err != nil || len(letters) != 1 || letters[0].State != store.DeadPending {
		t.Fatalf("dead letters %+v (%v) after a retry whose chat could not be opened; want one pending", letters, err)
	}
	e.now = e.now.Add(24 * time.Hour)
	if _, err := r.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	if out, ok, err := e.st.MessageHandled(e.ctx, posted.Key()); err != nil || !ok || out != store.OutcomePackage {
		t.Errorf("message handled as %q (%v, %v), want catalogued by the second retry", out, ok, err)
	}
}

// sourceSeenByInstance2 returns an env of account a whose world brings a
// chat's difference 300ms late, in which a second instance, on TDLib
// directory instance-2, has looked at a's source and stopped.
func sourceSeenByInstance2(t *testing.T) *env {
	t.Helper()
	e := newEnvWorld(t, tgsim.Config{Seed: 1, DifferenceDelay: 300 * time.Millisecond}, "a")
	before := e.world.ClientIn("a", "instance-2")
	if err := before.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := before.GetChat(e.ctx, e.src["a"]); err != nil {
		t.Fatal(err)
	}
	_ = before.Close()
	return e
}

// letterOfAnotherInstance records a dead letter of a document of a's
// source through one instance, and returns a pipeline (and its client)
// of a second instance on its own TDLib directory, which looked at the
// chat before the document was posted and has not followed it since.
func letterOfAnotherInstance(t *testing.T) (*env, *ingest.Pipeline, *tgsim.Client, tg.Message) {
	t.Helper()
	e := sourceSeenByInstance2(t)
	src := e.src["a"]

	p1, c1 := e.pipeline("a")
	posted := e.view(c1, e.world.Post(src, 0, tgsim.Post{FileName: "flaky.tar", Data: tarOf("a", "flaky")}))
	if err := p1.DeadLetter(e.ctx, posted, errors.New("download stalled")); err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(24 * time.Hour)
	p2, c2 := e.pipelineIn("a", "instance-2")
	return e, p2, c2, posted
}
