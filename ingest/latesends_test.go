package ingest_test

import (
	"fmt"
	"testing"
	"time"

	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// LateSends claims a message only for a token it watches, in that token's
// destination, within its window; it watches a bounded number of tokens.
func TestLateSendsClaimsOnlyTheTokensTakenInTheirWindow(t *testing.T) {
	t.Parallel()
	const dest, other tg.ChatID = -100, -200
	msg := func(chat tg.ChatID, id int64, token string) tg.Message {
		return tg.Message{ChatID: chat, ID: tg.MessageIDFromServer(id), Caption: "x.zip\n" + ingest.TokenPrefix + token,
			Document: &tg.Document{FileName: "x.zip"}}
	}
	l := ingest.NewLateSends()
	if l.Claims(msg(dest, 1, "t1")) {
		t.Fatal("claimed a message while watching nothing")
	}
	l.Watch(store.TakenIntent{Destination: dest, Token: "t1", Account: "a", Left: time.Hour})
	l.Watch(store.TakenIntent{Destination: dest, Token: "gone", Account: "a"})
	for _, c := range []struct {
		m    tg.Message
		want bool
	}{
		{msg(dest, 2, "t1"), true},
		{msg(other, 2, "t1"), false},  // another destination
		{msg(dest, 3, "t2"), false},   // a token not taken
		{msg(dest, 4, "gone"), false}, // its window passed
		{tg.Message{ChatID: dest, ID: tg.MessageIDFromServer(5), Caption: ingest.TokenPrefix + "t1"}, false},                               // no document
		{tg.Message{ChatID: dest, ID: tg.MessageIDFromServer(6) + 1, Caption: ingest.TokenPrefix + "t1", Document: &tg.Document{}}, false}, // a local id
	} {
		if got := l.Claims(c.m); got != c.want {
			t.Errorf("Claims(%d in %d, %q) = %v, want %v", c.m.ID, c.m.ChatID, c.m.Caption, got, c.want)
		}
	}
	var many []store.TakenIntent
	for i := range 10_000 {
		many = append(many, store.TakenIntent{Destination: other, Token: fmt.Sprint("m", i), Account: "a", Left: time.Hour})
	}
	if left := l.Watch(many...); left != 1 {
		t.Errorf("watching 10,000 more tokens left out %d, want 1 (the bound)", left)
	}
	if !l.Claims(msg(dest, 7, "t1")) {
		t.Error("a token watched before the bound was reached is no longer claimed")
	}
}

// Every send of a delivery carries its intent's token, the taker's own
// too. A send of the taker's own that no waiter claimed (its wait timed
// out) is its send, recorded as such: only a post its session was told
// of as new (Claims) is the away account's.
func TestOwnSendOfADeliveryTakenOverIsRecordedAsItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a", "b")
	late := ingest.NewLateSends()
	p, c, _ := e.pipelineWith("b", func(cfg *ingest.Config) { cfg.LateSends = late }, nil)
	posted := e.world.Post(e.src["b"], 0, tgsim.Post{FileName: "own.zip", Data: zipOf("own", "own")})
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	docs := e.delivered()
	if len(docs) != 1 {
		t.Fatalf("destination holds %d documents, want b's send", len(docs))
	}
	own := docs[0]
	token := ingest.TokenOf(own.Caption)
	// As if the intent had been a's, taken over by b, and b's send of it
	// had outlived its wait.
	reopen := func() {
		t.Helper()
		if _, err := e.st.Pool().Exec(e.ctx, `UPDATE deliveries SET state = 'intent', dest_message_id = NULL, account = 'a'
			WHERE token = $1`, token); err != nil {
			t.Fatal(err)
		}
	}
	reopen()
	late.Watch(store.TakenIntent{Destination: e.dest, Token: token, Account: "a", Left: time.Hour})
	recordedAs := func() string {
		t.Helper()
		if ok, err := p.RecordSend(e.ctx, own); err != nil || !ok {
			t.Fatalf("RecordSend = %v, %v; want the intent recorded", ok, err)
		}
		dl, ok, err := e.st.DeliveryByToken(e.ctx, token, e.dest)
		if err != nil || !ok || dl.State != store.DeliverySent || dl.DestMessageID != own.ID {
			t.Fatalf("delivery = %+v, %v, %v; want it recorded with %d", dl, ok, err, own.ID)
		}
		return dl.Account
	}
	if got := recordedAs(); got != "b" {
		t.Errorf("b's own send, unclaimed, recorded as %q's; want b's", got)
	}
	// Told of as a new post, the same message is a's late send.
	reopen()
	if !late.Claims(own) {
		t.Fatal("a post carrying the token taken is not claimed")
	}
	if got := recordedAs(); got != "a" {
		t.Errorf("a post claimed as a late send recorded as %q's; want a's", got)
	}
}
