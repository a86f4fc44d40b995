package tgsim

import (
	"testing"

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
	got, err := f.c.SearchForumTopics(f.ctx, forum, "books")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ThreadID != older || got[1].ThreadID != newer {
		t.Fatalf("topics = %+v; want %d (active last), then %d", got, older, newer)
	}
}
