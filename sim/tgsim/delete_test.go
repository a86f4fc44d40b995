package tgsim

import (
	"errors"
	"slices"
	"testing"

	"stashd/tg"
)

// sent sends the document of src to chat through c and returns the landed
// message.
func sent(t *testing.T, c *Client, chat tg.ChatID, src tg.Message, caption string) tg.Message {
	t.Helper()
	m, err := c.GetMessage(t.Context(), src.ChatID, src.ID)
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := c.SendDocument(t.Context(), chat, m.Document.File.RemoteID, caption)
	if err != nil {
		t.Fatal(err)
	}
	return next(t, c, func(u tg.SendSucceeded) bool { return u.OldMessageID == tmp.ID }).Message
}

// An account deletes its own message for everyone: it leaves history,
// search and the world's truth, and the client hears of it. Another
// sender's message needs the right to delete messages there; without it
// the request fails as TDLib's does and deletes nothing, not even the
// account's own messages named with it.
func TestDeleteMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ctx := f.ctx
	posted := f.w.Post(f.chat, 0, doc("a.zip", 10))
	mine := sent(t, f.c, f.chat, posted, "a.zip\nstashd:1")
	kept := sent(t, f.c, f.chat, posted, "a.zip\nstashd:2")

	err := f.c.DeleteMessages(ctx, f.chat, []tg.MessageID{mine.ID, posted.ID}, true)
	var te *tg.Error
	if !errors.As(err, &te) || te.Code != 400 || te.Message != "Message can't be deleted" || tg.Classify(err) != tg.ClassPermanent {
		t.Fatalf("deleting another sender's message: %v, want 400 Message can't be deleted", err)
	}
	if got := len(f.w.Messages(f.chat)); got != 3 {
		t.Fatalf("%d messages after a refused delete, want 3", got)
	}

	if err := f.c.DeleteMessages(ctx, f.chat, []tg.MessageID{mine.ID}, true); err != nil {
		t.Fatalf("deleting its own message: %v", err)
	}
	del := next(t, f.c, func(u tg.MessagesDeleted) bool { return u.Chat == f.chat })
	if !slices.Equal(del.IDs, []tg.MessageID{mine.ID}) || !del.IsPermanent || del.FromCache {
		t.Errorf("MessagesDeleted = %+v, want permanent [%d]", del, mine.ID)
	}
	var ids []tg.MessageID
	for _, m := range f.w.Messages(f.chat) {
		ids = append(ids, m.ID)
	}
	if want := []tg.MessageID{posted.ID, kept.ID}; !slices.Equal(ids, want) {
		t.Errorf("chat holds %v, want %v", ids, want)
	}
	found, err := f.c.SearchChatMessages(ctx, tg.Search{Chat: f.chat, Limit: tg.MaxSearchLimit, Filter: tg.FilterDocument})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range found {
		if m.ID == mine.ID {
			t.Errorf("search still finds the deleted message %d", m.ID)
		}
	}
	if _, err := f.c.GetMessage(ctx, f.chat, mine.ID); !errors.Is(err, tg.ErrMessageNotFound) {
		t.Errorf("getMessage of the deleted message: %v, want not found", err)
	}
	// Deleting it again is harmless: TDLib skips what is gone.
	if err := f.c.DeleteMessages(ctx, f.chat, []tg.MessageID{mine.ID}, true); err != nil {
		t.Errorf("deleting a deleted message: %v", err)
	}

	// With the right to delete messages, another sender's message goes too.
	f.w.SetDeleteRights("alice", f.chat, true)
	if err := f.c.DeleteMessages(ctx, f.chat, []tg.MessageID{posted.ID}, true); err != nil {
		t.Fatalf("deleting with delete rights: %v", err)
	}
	if got, want := f.w.Calls("alice")[tg.MethodDeleteMessages], 4; got != want {
		t.Errorf("deleteMessages counted %d times, want %d", got, want)
	}
	if got := f.w.Deleted(f.chat); got != 2 {
		t.Errorf("Deleted = %d, want 2", got)
	}
}

// TDLib deletes on the server only what its session holds: an id another
// session saw, but this one never loaded, is skipped without an error and
// the message stays. Once the session reads it, it goes. A message the
// session holds that was deleted since (by another session, unheard: the
// chat is not open here) is dropped and announced, without an error.
func TestDeleteMessagesOnlyWhatTheSessionHolds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ctx := f.ctx
	older := f.w.Post(f.chat, 0, doc("a.zip", 10))
	f.w.Post(f.chat, 0, doc("b.zip", 10)) // the chat's last message
	f.w.SetDeleteRights("alice", f.chat, true)
	other := f.w.ClientIn("alice", "other")
	t.Cleanup(func() { other.Close() })
	if err := other.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}

	if err := other.DeleteMessages(ctx, f.chat, []tg.MessageID{older.ID}, true); err != nil {
		t.Fatalf("deleting a message the session never loaded: %v, want no error (TDLib skips it)", err)
	}
	if !slices.ContainsFunc(f.w.Messages(f.chat), func(m tg.Message) bool { return m.ID == older.ID }) || f.w.Deleted(f.chat) != 0 {
		t.Fatalf("a message the deleting session never loaded was deleted (%d deleted)", f.w.Deleted(f.chat))
	}

	if _, err := other.GetMessage(ctx, f.chat, older.ID); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteMessages(ctx, f.chat, []tg.MessageID{older.ID}, true); err != nil {
		t.Fatalf("deleting a message the session read: %v", err)
	}
	if slices.ContainsFunc(f.w.Messages(f.chat), func(m tg.Message) bool { return m.ID == older.ID }) || f.w.Deleted(f.chat) != 1 {
		t.Fatalf("a message the session read was not deleted (%d deleted)", f.w.Deleted(f.chat))
	}

	// f.c read it before the deletion and never opened the chat: it still
	// holds it, and deleting it again drops it from its database.
	third := f.w.Post(f.chat, 0, doc("c.zip", 10))
	f.w.Post(f.chat, 0, doc("d.zip", 10))
	if _, err := f.c.GetMessage(ctx, f.chat, third.ID); err != nil {
		t.Fatal(err)
	}
	f.w.Delete(f.chat, third.ID)
	if m, err := f.c.GetMessage(ctx, f.chat, third.ID); err != nil || m.ID != third.ID {
		t.Fatalf("getMessage of a message deleted unheard: %v, %v; want the database's stale copy", m, err)
	}
	if err := f.c.DeleteMessages(ctx, f.chat, []tg.MessageID{third.ID}, true); err != nil {
		t.Fatalf("deleting a message the server deleted already: %v", err)
	}
	del := next(t, f.c, func(u tg.MessagesDeleted) bool { return u.Chat == f.chat })
	if !slices.Equal(del.IDs, []tg.MessageID{third.ID}) || !del.IsPermanent {
		t.Errorf("MessagesDeleted = %+v, want permanent [%d]", del, third.ID)
	}
	if _, err := f.c.GetMessage(ctx, f.chat, third.ID); !errors.Is(err, tg.ErrMessageNotFound) {
		t.Errorf("getMessage after the deletion: %v, want not found", err)
	}
}
