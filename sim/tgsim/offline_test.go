package tgsim

import (
	"context"
	"errors"
	"slices"
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

// A deletion while the account is offline is TDLib's own at once: the
// session forgets the message and announces it, getMessage answers 404
// from memory and the history leaves it out, while the request's answer
// waits for the server. The server's deletion is in TDLib's binlog, so it
// goes at the reconnect although the caller gave up, and at the next start
// on the same directory when the instance closed first. Another instance
// of the account keeps its copy until it hears of the deletion.
func TestOfflineDeletionIsLocalAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Seed: 1})
	f.w.SetDeleteRights("alice", f.chat, true)
	first := f.w.Post(f.chat, 0, doc("first.zip", 10))
	doomed := f.w.Post(f.chat, 0, doc("doomed.zip", 10))
	later := f.w.Post(f.chat, 0, doc("later.zip", 10))
	other := f.w.ClientIn("alice", "other")
	t.Cleanup(func() { other.Close() })
	if err := other.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.OpenChat(f.ctx, f.chat); err != nil { // its updates reach it
		t.Fatal(err)
	}
	for _, c := range []*Client{f.c, other} {
		for _, m := range []tg.Message{first, doomed, later} {
			if _, err := c.GetMessage(f.ctx, f.chat, m.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	onServer := func(want int, when string) {
		t.Helper()
		if n := len(f.w.Messages(f.chat)); n != want {
			t.Fatalf("the server holds %d messages %s, want %d", n, when, want)
		}
	}

	f.w.Disconnect("alice", 0)
	short, cancel := context.WithTimeout(f.ctx, 200*time.Millisecond)
	defer cancel()
	if err := f.c.DeleteMessages(short, f.chat, []tg.MessageID{doomed.ID}, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deleteMessages while offline, with a 200 ms deadline: %v; want the deadline (the answer waits for the server)", err)
	}
	if del := next(t, f.c, func(u tg.MessagesDeleted) bool { return u.Chat == f.chat }); !slices.Equal(del.IDs, []tg.MessageID{doomed.ID}) || !del.IsPermanent {
		t.Fatalf("the deleting session heard %+v, want [%d] deleted for good", del, doomed.ID)
	}
	quick, cancelQuick := context.WithTimeout(f.ctx, time.Second)
	defer cancelQuick()
	if m, err := f.c.GetMessage(quick, f.chat, doomed.ID); !errors.Is(err, tg.ErrMessageNotFound) {
		t.Fatalf("getMessage of the message it deleted, offline: %+v, %v; want 404 at once", m, err)
	}
	page, err := f.c.GetChatHistory(quick, f.chat, later.ID, 3)
	if err != nil {
		t.Fatalf("getChatHistory over the message it deleted, offline: %v; want the page at once", err)
	}
	if got, want := ids(page), []int64{later.ID.ServerID(), first.ID.ServerID()}; !slices.Equal(got, want) {
		t.Fatalf("history over the message it deleted, offline: %v, want %v", got, want)
	}
	// Asked again (stashd retries a deletion that timed out), the session
	// finds nothing of it to delete and answers at once.
	if err := f.c.DeleteMessages(quick, f.chat, []tg.MessageID{doomed.ID}, true); err != nil {
		t.Fatalf("deleteMessages again of the message it deleted, offline: %v; want ok at once", err)
	}
	if m, err := other.GetMessage(quick, f.chat, doomed.ID); err != nil || m.ID != doomed.ID {
		t.Fatalf("the other instance's getMessage, offline: %+v, %v; want its own copy", m, err)
	}
	onServer(3, "while the deletion waits for the connection")

	f.w.Reconnect("alice")
	onServer(2, "after the reconnect, the caller long gone")
	if d := f.w.Deleted(f.chat); d != 1 {
		t.Fatalf("World.Deleted = %d after the reconnect, want 1", d)
	}
	if del := next(t, other, func(u tg.MessagesDeleted) bool { return u.Chat == f.chat }); !slices.Equal(del.IDs, []tg.MessageID{doomed.ID}) {
		t.Fatalf("the other instance heard %+v, want [%d] deleted", del, doomed.ID)
	}

	// The chat's last message, deleted: the session moves it to the
	// newest message it holds below, at once.
	if c, err := f.c.GetChat(f.ctx, f.chat); err != nil || c.LastMessageID != later.ID {
		t.Fatalf("getChat before deleting the last message: %+v, %v; want %d last", c, err, later.ID)
	}
	f.w.Disconnect("alice", 0)
	short2, cancel2 := context.WithTimeout(f.ctx, 100*time.Millisecond)
	defer cancel2()
	if err := f.c.DeleteMessages(short2, f.chat, []tg.MessageID{later.ID}, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second deleteMessages while offline: %v; want the deadline", err)
	}
	if u := next(t, f.c, func(u tg.ChatLastMessage) bool { return u.Chat == f.chat }); u.LastMessageID != first.ID {
		t.Fatalf("after deleting the last message offline the session announced %+v; want %d, the one it holds below", u, first.ID)
	}
	quick2, cancelQuick2 := context.WithTimeout(f.ctx, time.Second)
	defer cancelQuick2()
	if c, err := f.c.GetChat(quick2, f.chat); err != nil || c.LastMessageID != first.ID {
		t.Fatalf("getChat after deleting the last message offline: %+v, %v; want %d last, at once", c, err, first.ID)
	}
	f.c.Close()
	f.w.Reconnect("alice")
	onServer(2, "after a reconnect with no instance on the deleting directory")
	again := f.w.Client("alice")
	t.Cleanup(func() { again.Close() })
	onServer(1, "once an instance started on the deleting directory")
}

// loadChats reads the chat lists from the database when an instance on
// the directory loaded them before, so it answers at once while the
// account is offline; on a directory that never loaded them it asks the
// server, and waits for the reconnect.
func TestLoadChatsNeedsTheServerOnAFreshDirectory(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Seed: 1}) // its client loaded the chats on ""
	f.w.Disconnect("alice", 0)
	again := f.w.Client("alice")
	t.Cleanup(func() { again.Close() })
	quick, cancel := context.WithTimeout(f.ctx, time.Second)
	defer cancel()
	if err := again.LoadChats(quick); err != nil {
		t.Fatalf("loadChats offline on a directory that loaded them before: %v; want them at once", err)
	}
	if _, err := again.GetChat(quick, f.chat); err != nil {
		t.Fatalf("getChat after loading the chats from the database: %v", err)
	}

	fresh := f.w.ClientIn("alice", "fresh")
	t.Cleanup(func() { fresh.Close() })
	short, cancelShort := context.WithTimeout(f.ctx, 100*time.Millisecond)
	defer cancelShort()
	if err := fresh.LoadChats(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("loadChats offline on a fresh directory, with a 100 ms deadline: %v; want the deadline", err)
	}
	done := async(func() error { return fresh.LoadChats(f.ctx) })
	select {
	case err := <-done:
		t.Fatalf("loadChats on a fresh directory answered while offline: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	f.w.Reconnect("alice")
	if err := answered(t, done, "loadChats"); err != nil {
		t.Fatalf("loadChats on a fresh directory after the reconnect: %v", err)
	}
}

// async runs call on a goroutine of its own; its answer comes on the
// channel returned.
func async(call func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- call() }()
	return done
}

// answered returns the answer on done of the request what, which the
// reconnect released, or fails the test after waitTimeout.
func answered(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("%s still waits %s after the reconnect", what, waitTimeout)
		return nil
	}
}

// A deletion made while offline that the server refuses at the reconnect
// (the right to delete others' messages taken away meanwhile) is undone in
// the session, as TDLib's on_failed_message_deletion does: the waiting
// request gets the refusal, the message stays on the server, and the
// session reads it back.
func TestOfflineDeletionRefusedAtTheReconnect(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Seed: 1})
	f.w.SetDeleteRights("alice", f.chat, true)
	posted := f.w.Post(f.chat, 0, doc("theirs.zip", 10))
	f.w.Post(f.chat, 0, doc("newer.zip", 10))
	if _, err := f.c.GetMessage(f.ctx, f.chat, posted.ID); err != nil {
		t.Fatal(err)
	}
	f.w.Disconnect("alice", 0)
	done := async(func() error { return f.c.DeleteMessages(f.ctx, f.chat, []tg.MessageID{posted.ID}, true) })
	next(t, f.c, func(u tg.MessagesDeleted) bool { return u.Chat == f.chat })
	f.w.SetDeleteRights("alice", f.chat, false)
	f.w.Reconnect("alice")
	err := answered(t, done, "deleteMessages")
	var te *tg.Error
	if !errors.As(err, &te) || te.Code != 400 {
		t.Fatalf("deleteMessages refused at the reconnect: %v; want a 400", err)
	}
	if n := len(f.w.Messages(f.chat)); n != 2 || f.w.Deleted(f.chat) != 0 {
		t.Fatalf("the server holds %d messages and counts %d deleted; want both kept, none deleted", n, f.w.Deleted(f.chat))
	}
	f.w.Disconnect("alice", 0)
	quick, cancel := context.WithTimeout(f.ctx, time.Second)
	defer cancel()
	if m, err := f.c.GetMessage(quick, f.chat, posted.ID); err != nil || m.ID != posted.ID {
		t.Fatalf("getMessage, offline again, of the message whose deletion was refused: %+v, %v; want it read back into the session", m, err)
	}
}
