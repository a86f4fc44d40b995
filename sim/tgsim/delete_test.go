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
