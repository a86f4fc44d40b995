package tgsim

import (
	"context"
	"errors"
	"testing"
	"time"

	"stashd/tg"
)

// While the account is offline, what the session's database holds is
// answered at once, and a request only the server can answer waits for the
// reconnect: then it is answered from the server as it is by then.
func TestServerRequestsWaitForTheReconnect(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Seed: 1})
	f.w.AddAccount("bob", false)
	pub := f.w.AddChat(tg.KindChannel, "public", "bob")
	f.w.SetUsername(pub, "stashd_public")
	forum := f.w.AddChat(tg.KindForum, "forum", "alice")
	topic := f.w.AddTopic(forum, "topic")
	f.w.SetTopicRights("alice", forum, true)
	// The session reads one message of the source; the others it never
	// reads.
	known := f.w.Post(f.chat, 0, doc("known.zip", 10))
	unread := f.w.Post(f.chat, 0, doc("unread.zip", 10))
	f.w.SetDeleteRights("alice", f.chat, true)
	doomed := f.w.Post(f.chat, 0, doc("doomed.zip", 10))
	for _, m := range []tg.Message{known, doomed} {
		if _, err := f.c.GetMessage(f.ctx, f.chat, m.ID); err != nil {
			t.Fatal(err)
		}
	}

	f.w.Disconnect("alice", 0)
	quick, cancel := context.WithTimeout(f.ctx, time.Second)
	defer cancel()
	if m, err := f.c.GetMessage(quick, f.chat, known.ID); err != nil || m.ID != known.ID {
		t.Fatalf("getMessage of a message the session holds, offline: %+v, %v; want it at once", m, err)
	}
	if page, err := f.c.GetChatHistory(quick, f.chat, known.ID, 1); err != nil || len(page) != 1 || page[0].ID != known.ID {
		t.Fatalf("getChatHistory of a page the session holds, offline: %+v, %v; want it at once", page, err)
	}
	short, cancelShort := context.WithTimeout(f.ctx, 100*time.Millisecond)
	defer cancelShort()
	if _, err := f.c.GetMessage(short, f.chat, unread.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("getMessage of an unread message with a 100 ms deadline, offline: %v; want the deadline", err)
	}

	type result struct {
		what string
		err  error
	}
	done := make(chan result, 10)
	ask := func(what string, req func() error) {
		go func() { done <- result{what, req()} }()
	}
	ask("getMessage of an unread message", func() error {
		m, err := f.c.GetMessage(f.ctx, f.chat, unread.ID)
		if err == nil && m.ID != unread.ID {
			err = errors.New("another message")
		}
		return err
	})
	ask("getChatHistory of unread messages", func() error {
		page, err := f.c.GetChatHistory(f.ctx, f.chat, unread.ID, 2)
		if err == nil && len(page) != 2 {
			err = errors.New("a page without the unread message")
		}
		return err
	})
	ask("searchChatMessages", func() error {
		_, err := f.c.SearchChatMessages(f.ctx, tg.Search{Chat: f.chat, Query: "unread", Limit: 10})
		return err
	})
	ask("getChatMessageByDate before the session's last message", func() error {
		_, err := f.c.GetChatMessageByDate(f.ctx, f.chat, known.Date.Add(-time.Hour))
		if errors.Is(err, tg.ErrMessageNotFound) {
			err = nil // the server's answer: nothing that old
		}
		return err
	})
	ask("getForumTopic", func() error {
		_, err := f.c.GetForumTopic(f.ctx, forum, topic)
		return err
	})
	ask("searchPublicChat of a name not resolved yet", func() error {
		ch, err := f.c.SearchPublicChat(f.ctx, "stashd_public")
		if err == nil && ch.ID != pub {
			err = errors.New("another chat")
		}
		return err
	})
	ask("getForumTopics", func() error {
		_, err := f.c.SearchForumTopics(f.ctx, forum, "", tg.TopicOffset{}, 10)
		return err
	})
	ask("createForumTopic", func() error {
		_, err := f.c.CreateForumTopic(f.ctx, forum, "made offline")
		return err
	})
	ask("toggleForumTopicIsClosed", func() error {
		return f.c.ToggleForumTopicIsClosed(f.ctx, forum, topic, true)
	})
	ask("deleteMessages of a message the session holds", func() error {
		return f.c.DeleteMessages(f.ctx, f.chat, []tg.MessageID{doomed.ID}, true)
	})
	select {
	case r := <-done:
		t.Fatalf("%s answered while the account is offline (%v), want it to wait for the reconnect", r.what, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if n := len(f.w.Messages(f.chat)); n != 3 {
		t.Fatalf("the source holds %d messages while the deletion waits for the connection, want 3", n)
	}
	f.w.Reconnect("alice")
	for range cap(done) {
		select {
		case r := <-done:
			if r.err != nil {
				t.Errorf("%s after the reconnect: %v", r.what, r.err)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("a request still waits %s after the reconnect", waitTimeout)
		}
	}
	if n := len(f.w.Messages(f.chat)); n != 2 {
		t.Errorf("the source holds %d messages after the reconnect, want 2 (one deleted)", n)
	}
}
