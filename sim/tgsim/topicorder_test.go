package tgsim

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"stashd/tg"
)

// getForumTopics answers in the server's order: the most recently active
// topic first, not the newest created.
func TestForumTopicsByLastActivity(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	forum := f.w.AddChat(tg.KindForum, "forum", "alice")
	older := f.w.AddTopic(forum, "books old")
	newer := f.w.AddTopic(forum, "books new")
	if err := f.c.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.w.Post(forum, older, Post{Text: "activity"})
	got, err := f.c.SearchForumTopics(f.ctx, forum, "books", tg.TopicOffset{}, tg.MaxSearchLimit)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Topics) != 2 || got.Topics[0].ThreadID != older || got.Topics[1].ThreadID != newer {
		t.Fatalf("topics = %+v; want %d (active last), then %d", got.Topics, older, newer)
	}
}

// getForumTopics pages as TDLib does: at most limit topics (the server
// answers at most 100 of a larger limit), the next offsets taken from the
// page's last topic (its last message's date and id, its thread), and after
// the last topic an empty page whose offsets are zero. The count is of
// every matching topic, and a topic active again between two pages moves
// to the front, out of the pages still to come.
func TestForumTopicsPages(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_750_000_000, 0)
	clock := start
	f := newFixture(t, Config{Now: func() time.Time { return clock }})
	forum := f.w.AddChat(tg.KindForum, "forum", "alice")
	var threads []int64
	for i := range 250 {
		clock = clock.Add(time.Second / 2) // two topics a second: dates tie
		threads = append(threads, f.w.AddTopic(forum, fmt.Sprintf("books %d", i)))
	}
	f.w.AddTopic(forum, "films")
	if err := f.c.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	page, err := f.c.SearchForumTopics(f.ctx, forum, "books", tg.TopicOffset{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Topics) != tg.MaxSearchLimit || page.TotalCount != 250 {
		t.Fatalf("first page: %d topics of %d; want 100 of 250", len(page.Topics), page.TotalCount)
	}
	last := page.Topics[len(page.Topics)-1]
	if want := (tg.TopicOffset{Date: time.Unix(start.Add(151*time.Second/2).Unix(), 0), MessageID: last.LastMessageID, ThreadID: last.ThreadID}); page.Next != want || last.ThreadID != threads[150] {
		t.Fatalf("next offsets %+v after topic %d; want %+v after topic %d", page.Next, last.ThreadID, want, threads[150])
	}
	// The topic first in line is active again: it leads the first page now,
	// and the pages after the one already read do not hold it.
	f.w.Post(forum, threads[249], Post{Text: "again"})
	var got []int64
	offset := page.Next
	for _, limit := range []int{100, 40, 40, 40} {
		p, err := f.c.SearchForumTopics(f.ctx, forum, "books", offset, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, t := range p.Topics {
			got = append(got, t.ThreadID)
		}
		offset = p.Next
		if len(p.Topics) == 0 {
			if !p.Next.IsZero() {
				t.Errorf("an empty page has next offsets %+v, want zero", p.Next)
			}
			break
		}
	}
	if len(got) != 150 || got[0] != threads[149] || got[149] != threads[0] {
		t.Fatalf("the pages after the first hold %d topics, from %d to %d; want 150, %d to %d", len(got), got[0], got[len(got)-1], threads[149], threads[0])
	}
	for i, id := range got {
		if id != threads[149-i] {
			t.Fatalf("topic %d of the later pages is %d, want %d", i, id, threads[149-i])
		}
	}
	if p, err := f.c.SearchForumTopics(f.ctx, forum, "books", tg.TopicOffset{}, 1); err != nil || len(p.Topics) != 1 || p.Topics[0].ThreadID != threads[249] {
		t.Errorf("first page of one: %+v, %v; want topic %d, active last", p, err, threads[249])
	}
	for _, bad := range []struct {
		offset tg.TopicOffset
		limit  int
		want   string
	}{
		{tg.TopicOffset{}, 0, "Invalid limit specified"},
		{tg.TopicOffset{Date: clock, MessageID: 5}, 100, "Invalid offset message identifier specified"},
		{tg.TopicOffset{Date: clock, ThreadID: 5}, 100, "Invalid message thread identifier specified"},
	} {
		var te *tg.Error
		if _, err := f.c.SearchForumTopics(f.ctx, forum, "books", bad.offset, bad.limit); !errors.As(err, &te) || te.Code != 400 || te.Message != bad.want {
			t.Errorf("offset %+v, limit %d: %v; want 400 %q", bad.offset, bad.limit, err, bad.want)
		}
	}
}
