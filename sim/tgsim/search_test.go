package tgsim

import (
	"errors"
	"slices"
	"testing"
	"time"

	"stashd/tg"
)

// searchFixture is a forum with two topics and this history (server ids):
//
//	1 topic A created   2 topic B created   3 doc in A
//	4 text (General)    5 doc in B          6 doc in A, caption "token-XYZ"
//	7 doc (General)     8 doc in B          9 text in A
//	10 doc in A
type searchFixture struct {
	*fixture
	forum        tg.ChatID
	topicA, topB int64
}

func newSearchFixture(t *testing.T, cfg Config) searchFixture {
	t.Helper()
	f := newFixture(t, cfg)
	forum := f.w.AddChat(tg.KindForum, "forum", "alice")
	a := f.w.AddTopic(forum, "A")
	b := f.w.AddTopic(forum, "B")
	f.w.Post(forum, a, doc("a1.zip", 1))
	f.w.Post(forum, 0, Post{Text: "hello"})
	f.w.Post(forum, b, doc("b1.zip", 1))
	p := doc("a2.zip", 1)
	p.Caption = "mirror token-XYZ"
	f.w.Post(forum, a, p)
	f.w.Post(forum, 0, doc("g1.zip", 1))
	f.w.Post(forum, b, doc("b2.zip", 1))
	f.w.Post(forum, a, Post{Text: "chat in A"})
	f.w.Post(forum, a, doc("a3.zip", 1))
	return searchFixture{fixture: f, forum: forum, topicA: a, topB: b}
}

func ids(ms []tg.Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.ID.ServerID()
	}
	return out
}

func TestSearchChatMessagesSemantics(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t, Config{})
	s := func(n int64) tg.MessageID { return tg.MessageIDFromServer(n) }
	docs := tg.FilterDocument
	cases := []struct {
		name string
		q    tg.Search
		want []int64
	}{
		{"newest first from 0", tg.Search{Filter: docs, Limit: 3}, []int64{10, 8, 7}},
		{"from is inclusive", tg.Search{Filter: docs, FromMessageID: s(7), Limit: 2}, []int64{7, 6}},
		{"from a non-matching message", tg.Search{Filter: docs, FromMessageID: s(9), Limit: 2}, []int64{8, 7}},
		{"from a local id", tg.Search{Filter: docs, FromMessageID: s(7) + 5, Limit: 2}, []int64{7, 6}},
		{"negative offset adds newer", tg.Search{Filter: docs, FromMessageID: s(7), Offset: -2, Limit: 4}, []int64{10, 8, 7, 6}},
		{"negative offset is not refilled", tg.Search{Filter: docs, FromMessageID: s(8), Offset: -3, Limit: 5}, []int64{10, 8, 7}},
		{"window newer only", tg.Search{Filter: docs, FromMessageID: s(3), Offset: -2, Limit: 3}, []int64{6, 5, 3}},
		{"oldest page", tg.Search{Filter: docs, FromMessageID: s(3), Limit: 5}, []int64{3}},
		{"nothing older", tg.Search{Filter: docs, FromMessageID: s(2), Limit: 5}, nil},
		{"thread filter", tg.Search{Filter: docs, ThreadID: f.topicA, Limit: 10}, []int64{10, 6, 3}},
		{"thread without filter", tg.Search{ThreadID: f.topicA, Limit: 10}, []int64{10, 9, 6, 3, 1}},
		{"whole chat without filter", tg.Search{Limit: 100}, []int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}},
		{"query matches caption words by prefix", tg.Search{Filter: docs, Query: "TOKEN-x", Limit: 10}, []int64{6}},
		{"query does not match inside a word", tg.Search{Filter: docs, Query: "oken", Limit: 10}, nil},
		{"query matches text", tg.Search{Query: "chat in", Limit: 10}, []int64{9}},
	}
	for _, tc := range cases {
		tc.q.Chat = f.forum
		got, err := f.c.SearchChatMessages(f.ctx, tc.q)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(ids(got), tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, ids(got), tc.want)
		}
		for _, m := range got {
			if tc.q.Filter == docs && m.Document == nil {
				t.Errorf("%s: message %d has no document", tc.name, m.ID)
			}
		}
	}
}

func TestSearchChatMessagesErrors(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t, Config{})
	bad := []tg.Search{
		{Limit: 0},
		{Limit: 101},
		{Limit: 3, Offset: -3},
		{Limit: 3, Offset: 1},
		{Limit: 3, FromMessageID: -1},
		{Limit: 3, ThreadID: 12345},
	}
	for _, q := range bad {
		q.Chat = f.forum
		if _, err := f.c.SearchChatMessages(f.ctx, q); tg.Classify(err) != tg.ClassPermanent {
			t.Errorf("%+v: err %v, want a 400", q, err)
		}
	}
	if _, err := f.c.SearchChatMessages(f.ctx, tg.Search{Chat: f.chat, Limit: 3, ThreadID: f.topicA}); err == nil {
		t.Error("thread filter in a channel succeeded")
	}
}

func TestSearchShortPages(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t, Config{ShortPageRate: 1, Seed: 3})
	full := []int64{10, 8, 7, 6, 5, 3}
	for range 20 {
		got, err := f.c.SearchChatMessages(f.ctx, tg.Search{Chat: f.forum, Filter: tg.FilterDocument, Limit: 6})
		if err != nil {
			t.Fatal(err)
		}
		// A short page is a non-empty prefix of the full one.
		if len(got) == 0 || len(got) >= len(full) || !slices.Equal(ids(got), full[:len(got)]) {
			t.Fatalf("short page %v is not a proper, non-empty prefix of %v", ids(got), full)
		}
	}
}

// Paging backward from the newest message with short pages still visits
// every document exactly once, when each next page starts below the oldest
// message seen.
func TestSearchPagingWithShortPages(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t, Config{ShortPageRate: 0.5, Seed: 11})
	var seen []int64
	from := tg.MessageID(0)
	for range 100 {
		page, err := f.c.SearchChatMessages(f.ctx, tg.Search{Chat: f.forum, Filter: tg.FilterDocument, FromMessageID: from, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		seen = append(seen, ids(page)...)
		from = page[len(page)-1].ID - 1
	}
	if want := []int64{10, 8, 7, 6, 5, 3}; !slices.Equal(seen, want) {
		t.Fatalf("paged %v, want %v", seen, want)
	}
}

// A non-empty query finds nothing younger than SearchIndexLag; an empty
// query lists it at once.
func TestSearchQueryLagsBehind(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{SearchIndexLag: time.Minute})
	p := doc("a.zip", 10)
	p.Caption = "a.zip\nstashd:0123abcd"
	posted := f.w.Post(f.chat, 0, p)
	q := tg.Search{Chat: f.chat, Query: "0123abcd", Filter: tg.FilterDocument, Limit: 10}
	if got, err := f.c.SearchChatMessages(f.ctx, q); err != nil || len(got) != 0 {
		t.Fatalf("query before indexing = %v, %v; want nothing", ids(got), err)
	}
	all, err := f.c.SearchChatMessages(f.ctx, tg.Search{Chat: f.chat, Filter: tg.FilterDocument, Limit: 10})
	if err != nil || len(all) != 1 || all[0].ID != posted.ID {
		t.Fatalf("empty query = %v, %v", ids(all), err)
	}
	f.clk.Advance(time.Minute)
	if got, err := f.c.SearchChatMessages(f.ctx, q); err != nil || len(got) != 1 {
		t.Fatalf("query after indexing = %v, %v", ids(got), err)
	}
}

// getChatHistory pages every kind of message, newest first, from a message
// (inclusive) back; a page past the first message is empty.
func TestGetChatHistory(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t, Config{})
	s := func(n int64) tg.MessageID { return tg.MessageIDFromServer(n) }
	for _, tc := range []struct {
		name  string
		from  tg.MessageID
		limit int
		want  []int64
	}{
		{"newest first from 0", 0, 4, []int64{10, 9, 8, 7}},
		{"from a message, inclusive", s(6), 3, []int64{6, 5, 4}},
		{"to the beginning", s(3), 100, []int64{3, 2, 1}},
		{"from an id between messages", s(6) + 1, 2, []int64{6, 5}},
		{"past the beginning", s(1) - 1, 10, []int64{}},
	} {
		got, err := f.c.GetChatHistory(t.Context(), f.forum, tc.from, tc.limit)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(ids(got), tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, ids(got), tc.want)
		}
	}
	for _, limit := range []int{0, 101} {
		var te *tg.Error
		if _, err := f.c.GetChatHistory(t.Context(), f.forum, 0, limit); !errors.As(err, &te) || te.Code != 400 {
			t.Errorf("limit %d: %v, want 400", limit, err)
		}
	}
}
