package tg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// Paging forward over short pages (TDLib may return fewer messages than
// asked, keeping the newest) still sees every document exactly once.
func TestDocumentsAfterSurvivesShortPages(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{0, 0.5, 1} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			w := tgsim.NewWorld(tgsim.Config{Seed: 9, ShortPageRate: rate})
			w.AddAccount("a", false)
			chat := w.AddChat(tg.KindChannel, "c", "a")
			var want []tg.MessageID
			for i := range 350 {
				if i%3 == 0 {
					w.Post(chat, 0, tgsim.Post{Text: "text"})
				}
				want = append(want, w.Post(chat, 0, tgsim.Post{FileName: fmt.Sprintf("%d.zip", i), Data: []byte{byte(i)}}).ID)
			}
			c := w.Client("a")
			defer c.Close()
			if err := c.LoadChats(t.Context()); err != nil {
				t.Fatal(err)
			}
			var got []tg.MessageID
			after := int64(0)
			for range 1000 {
				page, err := tg.DocumentsAfter(t.Context(), c, chat, after, 100)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 {
					break
				}
				for _, m := range page {
					got = append(got, m.ID)
				}
				after = page[len(page)-1].ID.ServerID()
			}
			if len(got) != len(want) {
				t.Fatalf("paged %d documents, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("document %d = %d, want %d", i, got[i], want[i])
				}
			}
		})
	}
}

// ForumTopics reads the pages of getForumTopics to the end: the page after
// the last topic, or the short page that brings the topics read to the
// server's count.
func TestForumTopicsPagesToTheEnd(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		others int // topics named "books N", all newer than "books"
		calls  int
		read   int
	}{
		{"one short page", 20, 1, 21},
		{"every page, the last one short", 250, 3, 251},
		{"every page, the last one full", 199, 3, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := tgsim.NewWorld(tgsim.Config{Seed: 1})
			w.AddAccount("a", false)
			forum := w.AddChat(tg.KindForum, "forum", "a")
			books := w.AddTopic(forum, "books")
			for i := range tt.others {
				w.AddTopic(forum, fmt.Sprintf("books %d", i))
			}
			w.AddTopic(forum, "films")
			c := w.Client("a")
			defer c.Close()
			if err := c.LoadChats(t.Context()); err != nil {
				t.Fatal(err)
			}
			got, err := tg.ForumTopics(t.Context(), c, forum, "books")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.read || got[len(got)-1].ThreadID != books {
				t.Errorf("read %d topics, the last %+v; want %d, the last books (%d)", len(got), got[len(got)-1], tt.read, books)
			}
			if n := w.Calls("a")[tg.MethodGetForumTopics]; n != tt.calls {
				t.Errorf("getForumTopics called %d times, want %d", n, tt.calls)
			}
		})
	}
}

// pages answers getForumTopics from a script of pages, whatever the offset.
type pages struct {
	script []tg.TopicPage
	asked  []tg.TopicOffset
}

func (p *pages) SearchForumTopics(_ context.Context, _ tg.ChatID, _ string, offset tg.TopicOffset, _ int) (tg.TopicPage, error) {
	p.asked = append(p.asked, offset)
	if len(p.asked) > len(p.script) {
		return tg.TopicPage{}, errors.New("asked past the script")
	}
	return p.script[len(p.asked)-1], nil
}

// A short page is no end while the server counts more topics (TDLib may
// answer fewer than asked), and a page whose next offset does not move on
// ends the pages rather than asking for it forever.
func TestForumTopicsShortPagesAndStuckOffsets(t *testing.T) {
	t.Parallel()
	at := func(thread int64) tg.TopicOffset {
		return tg.TopicOffset{Date: time.Unix(1_750_000_000+thread, 0), MessageID: tg.MessageIDFromServer(thread), ThreadID: thread << 20}
	}
	topics := func(n int) []tg.Topic { return make([]tg.Topic, n) }
	p := &pages{script: []tg.TopicPage{
		{Topics: topics(60), TotalCount: 200, Next: at(9)},
		{Topics: topics(60), TotalCount: 200, Next: at(8)},
		{Topics: topics(30), TotalCount: 200, Next: at(7)},
		{Topics: topics(30), TotalCount: 200, Next: at(7)}, // the same next offset again
	}}
	got, err := tg.ForumTopics(t.Context(), p, -1002123456789, "")
	if err != nil || len(got) != 180 {
		t.Fatalf("read %d topics, %v; want 180", len(got), err)
	}
	if want := []tg.TopicOffset{{}, at(9), at(8), at(7)}; !slices.Equal(p.asked, want) {
		t.Errorf("asked from %v, want %v", p.asked, want)
	}
}
