package tgsim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"stashd/tg"
)

// albumItems posts n documents in the fixture's source and returns them as
// album items, captioned "item i".
func albumItems(t *testing.T, f sendFixture, n int) []tg.AlbumItem {
	t.Helper()
	items := make([]tg.AlbumItem, n)
	for i := range items {
		posted := f.w.Post(f.chat, 0, doc(fmt.Sprintf("part%d.rar", i+1), 100+i))
		m, err := f.c.GetMessage(f.ctx, f.chat, posted.ID)
		if err != nil {
			t.Fatal(err)
		}
		items[i] = tg.AlbumItem{RemoteFileID: m.Document.File.RemoteID, Caption: fmt.Sprintf("item %d", i)}
	}
	return items
}

func TestSendAlbumOneRequestMessagesSettleEachWithItsOwnUpdate(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	items := albumItems(t, f, 3)
	before := f.w.Calls("alice")
	tmps, err := f.c.SendDocumentAlbum(f.ctx, f.dest, 0, items, tg.SendOptions{Silent: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(tmps) != 3 {
		t.Fatalf("album answered %d messages, want 3", len(tmps))
	}
	album := tmps[0].AlbumID
	for i, m := range tmps {
		if m.ID.IsServer() || m.AlbumID == 0 || m.AlbumID != album || m.Caption != items[i].Caption {
			t.Fatalf("temporary message %d = %+v; want a local id in album %d captioned %q", i, m, album, items[i].Caption)
		}
	}
	after := f.w.Calls("alice")
	if got := after[tg.MethodSendMessageAlbum] - before[tg.MethodSendMessageAlbum]; got != 1 {
		t.Errorf("sendMessageAlbum counted %d times, want 1", got)
	}
	if got := after[tg.MethodSendMessage] - before[tg.MethodSendMessage]; got != 0 {
		t.Errorf("sendMessage counted %d times for an album, want 0", got)
	}
	seen := map[tg.MessageID]bool{}
	for range tmps {
		ok := next[tg.SendSucceeded](t, f.c, nil)
		seen[ok.OldMessageID] = true
		if ok.Message.AlbumID != album || !ok.Message.ID.IsServer() {
			t.Errorf("sent message %+v; want a server message of album %d", ok.Message, album)
		}
	}
	for _, m := range tmps {
		if !seen[m.ID] {
			t.Errorf("no SendSucceeded for temporary message %d", m.ID)
		}
	}
	truth := f.w.Messages(f.dest)
	if len(truth) != 3 {
		t.Fatalf("destination holds %d messages, want 3", len(truth))
	}
	for _, s := range f.w.Sends() {
		if s.Album != album || !s.Silent {
			t.Errorf("send record %+v; want album %d, silent", s, album)
		}
	}
}

func TestSendAlbumRefusedWholeAsTDLibDoes(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	items := albumItems(t, f, 11)
	for _, c := range []struct {
		name   string
		items  []tg.AlbumItem
		thread int64
		want   string
	}{
		{"empty", nil, 0, "There are no messages to send"},
		{"eleven", items, 0, "Too many messages to send as an album"},
		{"one bad remote id", []tg.AlbumItem{items[0], {RemoteFileID: "nope", Caption: "x"}, items[2]}, 0, "Wrong remote file identifier"},
		{"one caption too long", []tg.AlbumItem{items[0], {RemoteFileID: items[1].RemoteFileID, Caption: strings.Repeat("x", 5000)}}, 0, "caption is too long"},
		// TDLib checks the items before their number, and their number
		// before the topic.
		{"eleven with a bad one", append([]tg.AlbumItem{{RemoteFileID: "nope", Caption: "x"}}, items[1:]...), 0, "Wrong remote file identifier"},
		{"eleven into a topic of a channel", items, 1 << 20, "Too many messages to send as an album"},
		{"two into a topic of a channel", items[:2], 1 << 20, "Chat doesn't have threads"},
	} {
		_, err := f.c.SendDocumentAlbum(f.ctx, f.dest, c.thread, c.items, tg.SendOptions{})
		if tg.Classify(err) != tg.ClassPermanent || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a 400 %q", c.name, err, c.want)
		}
	}
	if n := len(f.w.Sends()); n != 0 {
		t.Errorf("refused albums sent %d messages, want none", n)
	}
}

func TestSendAlbumOfOneIsAnOrdinaryMessage(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	tmps, err := f.c.SendDocumentAlbum(f.ctx, f.dest, 0, albumItems(t, f, 1), tg.SendOptions{})
	if err != nil || len(tmps) != 1 || tmps[0].AlbumID != 0 {
		t.Fatalf("album of one = %+v, %v; want one message outside any album", tmps, err)
	}
	if ok := next[tg.SendSucceeded](t, f.c, nil); ok.Message.AlbumID != 0 {
		t.Errorf("sent %+v, want no album", ok.Message)
	}
}

// A request error fails every message of an album with the same error,
// as TDLib's SendMultiMediaQuery does: with a failure rate, albums land
// whole or not at all. The one way an album lands in part is a message
// the server's answer left out: it fails alone with 400 "Message was not
// sent", which is retryable.
func TestSendAlbumFailsWholeOrLandsInPartAsTDLibDoes(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{Seed: 7, SendFailRate: 0.4})
	items := albumItems(t, f, 4)
	whole := 0
	for range 10 {
		tmps, err := f.c.SendDocumentAlbum(f.ctx, f.dest, 0, items, tg.SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var errs []string
		for range tmps {
			if u, ok := nextSendOutcome(t, f).(tg.SendFailed); ok {
				errs = append(errs, u.Err.Error())
			}
		}
		switch {
		case len(errs) == len(tmps) && len(slices.Compact(errs)) == 1:
			whole++
		case len(errs) != 0:
			t.Errorf("an album failed in part, %v, by a request error", errs)
		}
	}
	if whole == 0 {
		t.Fatal("no album of 10 failed with a 40% failure rate per request")
	}

	g := newSendFixture(t, Config{Seed: 8})
	items = albumItems(t, g, 3)
	g.w.InjectSendFailures("alice", false, true, false)
	tmps, err := g.c.SendDocumentAlbum(g.ctx, g.dest, 0, items, tg.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for range tmps {
		switch u := nextSendOutcome(t, g).(type) {
		case tg.SendSucceeded:
			ok++
		case tg.SendFailed:
			if !tg.NotSent(u.Err) || tg.Classify(u.Err) != tg.ClassRetryable || u.MessageID == 0 {
				t.Errorf("failed send %+v; want 400 \"Message was not sent\", retryable, with the failed message's id", u)
			}
		}
	}
	if ok != 2 {
		t.Errorf("%d of the album's 3 messages landed, want 2", ok)
	}
}

// nextSendOutcome returns the next SendSucceeded or SendFailed of f's client.
func nextSendOutcome(t *testing.T, f sendFixture) tg.Update {
	t.Helper()
	var out tg.Update
	collectUntil(t, f.c, func(u tg.Update) bool {
		switch u.(type) {
		case tg.SendSucceeded, tg.SendFailed:
			out = u
			return true
		}
		return false
	})
	return out
}

// A chat's send limit counts an album's messages: an album of three takes
// three of a burst of five, and the next album of three, with two left, is
// refused whole (a 429 for each message, three counted as flooded).
func TestSendAlbumTakesATokenPerMessage(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	f.w.LimitChatSends(f.dest, 1.0/600, 5)
	items := albumItems(t, f, 3)
	if _, err := f.c.SendDocumentAlbum(f.ctx, f.dest, 0, items, tg.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	for range items {
		next[tg.SendSucceeded](t, f.c, nil)
	}
	if _, err := f.c.SendDocumentAlbum(f.ctx, f.dest, 0, items, tg.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	for range items {
		if failed := next[tg.SendFailed](t, f.c, nil); failed.Err == nil || !strings.Contains(failed.Err.Error(), "429") {
			t.Errorf("message of the second album: %v, want a 429", failed.Err)
		}
	}
	if n := f.w.ChatFlooded(f.dest); n != 3 {
		t.Errorf("%d messages counted as refused by the chat's limit, want 3", n)
	}
	if n := len(f.w.Messages(f.dest)); n != 3 {
		t.Errorf("destination holds %d messages, want the first album's 3", n)
	}
}
