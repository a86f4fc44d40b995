package ingest_test

import (
	"fmt"
	"testing"
	"time"

	"stashd/ingest"
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
	l.Watch(time.Hour, store.TakenIntent{Destination: dest, Token: "t1", Account: "a"})
	l.Watch(0, store.TakenIntent{Destination: dest, Token: "gone", Account: "a"})
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
		many = append(many, store.TakenIntent{Destination: other, Token: fmt.Sprint("m", i), Account: "a"})
	}
	if left := l.Watch(time.Hour, many...); left != 1 {
		t.Errorf("watching 10,000 more tokens left out %d, want 1 (the bound)", left)
	}
	if !l.Claims(msg(dest, 7, "t1")) {
		t.Error("a token watched before the bound was reached is no longer claimed")
	}
}
