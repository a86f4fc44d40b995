package tgsim

import (
	"errors"
	"slices"
	"testing"
	"time"

	"stashd/tg"
)

// msgIDs returns the ids of msgs.
func msgIDs(msgs []tg.Message) []tg.MessageID {
	out := make([]tg.MessageID, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// A message being sent is in the sending session's history, first from the
// end, is the chat's last message and is found by getMessage; other
// sessions do not see it.
func TestPendingSendInSessionView(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendLatency: time.Hour})
	landed := f.w.Post(f.dest, 0, Post{Text: "before"})
	tmp, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "token")
	if err != nil {
		t.Fatal(err)
	}
	page, err := f.c.GetChatHistory(f.ctx, f.dest, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := msgIDs(page); len(got) != 2 || got[0] != tmp.ID || got[1] != landed.ID {
		t.Fatalf("history = %v; want the pending %d, then %d", got, tmp.ID, landed.ID)
	}
	if page[0].Caption != "token" || page[0].Document == nil {
		t.Fatalf("pending message in history = %+v", page[0])
	}
	if page, err := f.c.GetChatHistory(f.ctx, f.dest, landed.ID, 10); err != nil || len(page) != 1 || page[0].ID != landed.ID {
		t.Fatalf("history from %d = %v, %v; want it alone", landed.ID, msgIDs(page), err)
	}
	c, err := f.c.GetChat(f.ctx, f.dest)
	if err != nil || c.LastMessageID != tmp.ID {
		t.Fatalf("getChat last message = %d, %v; want the pending %d", c.LastMessageID, err, tmp.ID)
	}
	if m, err := f.c.GetMessage(f.ctx, f.dest, tmp.ID); err != nil || m.Caption != "token" {
		t.Fatalf("getMessage of the pending message = %+v, %v", m, err)
	}
	if st, _ := f.c.MessageSendingState(f.dest, tmp.ID); st != SendPending {
		t.Fatalf("sending state = %d, want pending", st)
	}
	if m, err := f.c.GetChatMessageByDate(f.ctx, f.dest, f.clk.Now()); err != nil || m.ID != tmp.ID {
		t.Fatalf("getChatMessageByDate(now) = %d, %v; want the pending %d", m.ID, err, tmp.ID)
	}

	bob := f.w.Client("bob")
	defer bob.Close()
	if err := bob.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	if page, err := bob.GetChatHistory(f.ctx, f.dest, 0, 10); err != nil || len(page) != 1 || page[0].ID != landed.ID {
		t.Fatalf("another session's history = %v, %v; want the server's message alone", msgIDs(page), err)
	}
	if _, err := bob.GetMessage(f.ctx, f.dest, tmp.ID); !errors.Is(err, tg.ErrMessageNotFound) {
		t.Fatalf("another session's getMessage of the pending id: %v, want 404", err)
	}
}

// A failed send stays in the session's history under its new local id
// until it is deleted.
func TestFailedSendInSessionHistoryUntilDeleted(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendFailRate: 1})
	landed := f.w.Post(f.dest, 0, Post{Text: "before"})
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "token"); err != nil {
		t.Fatal(err)
	}
	failed := next[tg.SendFailed](t, f.c, nil)
	page, err := f.c.GetChatHistory(f.ctx, f.dest, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := msgIDs(page); len(got) != 2 || got[0] != failed.MessageID || got[1] != landed.ID {
		t.Fatalf("history = %v; want the failed %d, then %d", got, failed.MessageID, landed.ID)
	}
	if st, err := f.c.MessageSendingState(f.dest, failed.MessageID); st != SendFailedState || err == nil {
		t.Fatalf("sending state = %d, %v; want failed with its error", st, err)
	}
	if c, err := f.c.GetChat(f.ctx, f.dest); err != nil || c.LastMessageID != failed.MessageID {
		t.Fatalf("getChat last message = %d, %v; want the failed %d", c.LastMessageID, err, failed.MessageID)
	}
	if err := f.c.DeleteMessages(f.ctx, f.dest, []tg.MessageID{failed.MessageID}, true); err != nil {
		t.Fatal(err)
	}
	if page, err := f.c.GetChatHistory(f.ctx, f.dest, 0, 10); err != nil || len(page) != 1 || page[0].ID != landed.ID {
		t.Fatalf("history after the deletion = %v, %v", msgIDs(page), err)
	}
	if c, err := f.c.GetChat(f.ctx, f.dest); err != nil || c.LastMessageID != landed.ID {
		t.Fatalf("getChat last message after the deletion = %d, %v; want %d", c.LastMessageID, err, landed.ID)
	}
}

// getChatMessageByDate answers from the chat's last message as the
// session knows it when that is not newer than the date: a session
// restarted on its directory, which has not opened the chat, answers with
// the last message it learned although newer ones exist.
func TestMessageByDateFromTheSessionsLastMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	old := f.w.Post(f.chat, 0, Post{Text: "old"})
	dir := t.TempDir()
	c1 := f.w.ClientIn("alice", dir)
	lookAt(t, f, c1, f.chat)
	c1.Close()
	f.clk.Advance(time.Hour)
	newer := f.w.Post(f.chat, 0, Post{Text: "newer"})
	c2 := f.w.ClientIn("alice", dir)
	defer c2.Close()
	if err := c2.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	m, err := c2.GetChatMessageByDate(f.ctx, f.chat, f.clk.Now())
	if err != nil || m.ID != old.ID {
		t.Fatalf("by date from a lagging session = %d, %v; want its last message %d (the server's is %d)", m.ID, err, old.ID, newer.ID)
	}
	// A date before the session's last message goes to the server.
	if m, err := c2.GetChatMessageByDate(f.ctx, f.chat, old.Date.Add(-time.Second)); !errors.Is(err, tg.ErrMessageNotFound) {
		t.Fatalf("by date before every message = %d, %v; want 404", m.ID, err)
	}
	// Once the chat is opened the difference brings the last message.
	if err := c2.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	if m, err := c2.GetChatMessageByDate(f.ctx, f.chat, f.clk.Now()); err != nil || m.ID != newer.ID {
		t.Fatalf("by date after the difference = %d, %v; want %d", m.ID, err, newer.ID)
	}
}

// A send starts with updateNewMessage of its temporary message and
// updateChatLastMessage naming it, before its outcome, to the sending
// session only.
func TestSendAnnouncesItsTemporaryMessage(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	tmp, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "token")
	if err != nil {
		t.Fatal(err)
	}
	got := collectUntil(t, f.c, func(u tg.Update) bool { _, ok := u.(tg.SendSucceeded); return ok })
	newAt, lastAt := -1, -1
	for i, u := range got {
		switch u := u.(type) {
		case tg.NewMessage:
			if u.Message.ID == tmp.ID && u.Message.ChatID == f.dest && u.Message.Caption == "token" {
				newAt = i
			}
		case tg.ChatLastMessage:
			if u.Chat == f.dest && u.LastMessageID == tmp.ID {
				lastAt = i
			}
		}
	}
	if newAt < 0 || lastAt < 0 {
		t.Fatalf("updates before the outcome: %v; want updateNewMessage and updateChatLastMessage of %d", got, tmp.ID)
	}
}

// A short history page holds the session's local messages only down to its
// oldest server message: one below it would make the page skip the server
// messages in between.
func TestShortHistoryPageKeepsLocalMessagesInPlace(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendFailRate: 1, ShortPageRate: 1, Seed: 3})
	f.w.Post(f.dest, 0, Post{Text: "before"})
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "token"); err != nil {
		t.Fatal(err)
	}
	failed := next[tg.SendFailed](t, f.c, nil)
	after := postN(f.w, f.dest, 0, 6, "after")
	for range 20 {
		page, err := f.c.GetChatHistory(f.ctx, f.dest, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 || len(page) == 8 {
			t.Fatalf("page = %v; want a short one", msgIDs(page))
		}
		// Every message above the page's oldest is on it.
		oldest := page[len(page)-1].ID
		want := []tg.MessageID{}
		for i := len(after) - 1; i >= 0 && after[i].ID >= oldest; i-- {
			want = append(want, after[i].ID)
			if i == 0 && failed.MessageID >= oldest {
				want = append(want, failed.MessageID)
			}
		}
		if !slices.Equal(msgIDs(page), want) {
			t.Fatalf("page = %v; want %v", msgIDs(page), want)
		}
	}
}

// A failed send keeps its temporary message's place, after the server
// message the temporary id followed, although the chat received messages
// between the send and its failure (TDLib's fail_send_message): its
// ServerFloor is where a read starting after it must start.
func TestFailedSendKeepsItsPlace(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendFailRate: 1})
	f.w.HoldSends(true)
	before := f.w.Post(f.dest, 0, Post{Text: "before"})
	tmp, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "token")
	if err != nil {
		t.Fatal(err)
	}
	between := f.w.Post(f.dest, 0, Post{Text: "between"})
	f.c.Close() // a held send settles as its client closes
	failed := f.c.FailedMessages(f.dest)
	if len(failed) != 1 || failed[0].ServerFloor() != before.ID.ServerID() {
		t.Fatalf("failed %v (temporary %d); want one after %d, below %d", failed, tmp.ID, before.ID, between.ID)
	}
}

// A history page whose server messages were all too new to show holds
// none of the session's local messages below them: the next page, from
// such a message, would skip the server messages in between.
func TestHiddenHistoryPageHoldsNoLocalMessageBelowIt(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendFailRate: 1})
	group := f.w.AddChat(tg.KindBasicGroup, "group", "alice")
	f.w.Post(group, 0, Post{Text: "first"})
	lookAt(t, f.fixture, f.c, group)
	if _, err := f.c.SendDocument(f.ctx, group, f.src.Document.File.RemoteID, "token"); err != nil {
		t.Fatal(err)
	}
	failed := next[tg.SendFailed](t, f.c, nil)
	known := postN(f.w, group, 0, 3, "known")
	next[tg.ChatLastMessage](t, f.c, func(u tg.ChatLastMessage) bool { return u.LastMessageID == known[2].ID })
	f.w.Disconnect("alice", time.Hour)
	late := postN(f.w, group, 0, 2, "late")
	page, err := f.c.GetChatHistory(f.ctx, group, late[1].ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(msgIDs(page), failed.MessageID) {
		t.Fatalf("page from %d = %v; holds the failed %d below the known %v", late[1].ID, msgIDs(page), failed.MessageID, known)
	}
}
