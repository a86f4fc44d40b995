package tgsim

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"stashd/tg"
)

// commonBoxKinds are the kinds of chat whose updates come in the
// account's common update box: TDLib checks their messages against the
// last one learned through updates as it checks a channel's.
var commonBoxKinds = []tg.ChatKind{tg.KindBasicGroup, tg.KindPrivate}

// eachCommonBoxGroup runs test in a parallel subtest for each of
// commonBoxKinds, on a fresh fixture with a chat "group" of that kind
// whose member is alice.
func eachCommonBoxGroup(t *testing.T, test func(t *testing.T, f *fixture, group tg.ChatID)) {
	t.Helper()
	for _, kind := range commonBoxKinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, Config{})
			test(t, f, f.w.AddChat(kind, "group", "alice"))
		})
	}
}

// lookAt loads c's chats and opens each of chats' information (getChat),
// as a session that looked at them.
func lookAt(t *testing.T, f *fixture, c *Client, chats ...tg.ChatID) {
	t.Helper()
	if err := c.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	for _, chat := range chats {
		if _, err := c.GetChat(f.ctx, chat); err != nil {
			t.Fatal(err)
		}
	}
}

// A basic group's or a private chat's message newer than the last one the
// session learned through updates is not shown from the server: getMessage
// answers 404 without asking, the history leaves it out, and no difference
// is started; its update brings it.
func TestCommonBoxChatHidesTooNewUntilItsUpdate(t *testing.T) {
	t.Parallel()
	eachCommonBoxGroup(t, func(t *testing.T, f *fixture, group tg.ChatID) {
		first := f.w.Post(group, 0, Post{Text: "first"})
		lookAt(t, f, f.c, group)
		f.w.Disconnect("alice", time.Hour) // its updates wait for the reconnect
		late := f.w.Post(group, 0, Post{Text: "late"})
		if _, err := f.c.GetMessage(f.ctx, group, late.ID); !errors.Is(err, tg.ErrMessageNotFound) {
			t.Fatalf("getMessage of a message newer than the session knows: %v, want 404", err)
		}
		page, err := f.c.GetChatHistory(f.ctx, group, late.ID, 10)
		if err != nil || len(page) != 1 || page[0].ID != first.ID {
			t.Fatalf("history from the new message = %v, %v; want %d alone", msgIDs(page), err, first.ID)
		}
		f.w.Reconnect("alice")
		next[tg.ChatLastMessage](t, f.c, func(u tg.ChatLastMessage) bool { return u.Chat == group && u.LastMessageID == late.ID })
		if m, err := f.c.GetMessage(f.ctx, group, late.ID); err != nil || m.ID != late.ID {
			t.Fatalf("getMessage after the update = %d, %v", m.ID, err)
		}
	})
}

// An instance started on a database directory learns, as TDLib's
// getDifference at start brings it, what its basic groups and private
// chats received while no instance ran there: updateNewMessage, without
// opening the chat.
func TestStartDifferenceBringsCommonBoxMessages(t *testing.T) {
	t.Parallel()
	eachCommonBoxGroup(t, func(t *testing.T, f *fixture, group tg.ChatID) {
		f.w.Post(group, 0, Post{Text: "first"})
		earlier := f.w.ClientIn("alice", "db")
		lookAt(t, f, earlier, group)
		earlier.Close()
		missed := f.w.Post(group, 0, Post{Text: "while down"})
		later := f.w.ClientIn("alice", "db")
		defer later.Close()
		next[tg.NewMessage](t, later, func(u tg.NewMessage) bool { return u.Message.ID == missed.ID })
		if err := later.LoadChats(f.ctx); err != nil {
			t.Fatal(err)
		}
		if m, err := later.GetMessage(f.ctx, group, missed.ID); err != nil || m.ID != missed.ID {
			t.Fatalf("getMessage of the missed message = %d, %v", m.ID, err)
		}
	})
}

// The difference at start brings the basic groups' messages in the order
// the common box numbered them, the same on every run.
func TestStartDifferenceInBoxOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	var groups []tg.ChatID
	for i := range 8 {
		groups = append(groups, f.w.AddChat(tg.KindBasicGroup, fmt.Sprint("group", i), "alice"))
	}
	earlier := f.w.ClientIn("alice", "db")
	lookAt(t, f, earlier, groups...)
	earlier.Close()
	var want []tg.MessageID
	for _, g := range groups {
		want = append(want, f.w.Post(g, 0, Post{Text: "while down"}).ID)
	}
	later := f.w.ClientIn("alice", "db")
	defer later.Close()
	for _, id := range want {
		if u := next[tg.NewMessage](t, later, nil); u.Message.ID != id {
			t.Fatalf("updateNewMessage of %d; want %d (box order %v)", u.Message.ID, id, want)
		}
	}
}
