package tgsim

import (
	"testing"

	"stashd/tg"
)

// getChatHistory from the end (from_message_id 0) starts at the last
// message the session's database knows: TDLib asks the server for the
// end of a history only when it knows no last message
// (MessagesManager::get_history_impl). A session restarted on its
// directory does not see, from the end, messages posted while none of its
// sessions ran, until it opens the chat; a page from an older message, a
// new directory and a chat whose last message is unknown read the server.
func TestGetChatHistoryFromTheEndStartsAtTheDatabasesLastMessage(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{Seed: 1, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	dest := w.AddChat(tg.KindChannel, "dest", "a")
	first := w.Post(dest, 0, Post{Text: "first"})
	ctx := t.Context()
	open := func(dir string) *Client {
		c := w.ClientIn("a", dir)
		t.Cleanup(func() { _ = c.Close() })
		if err := c.LoadChats(ctx); err != nil {
			t.Fatal(err)
		}
		return c
	}
	newest := func(c *Client, from tg.MessageID) tg.MessageID {
		t.Helper()
		page, err := c.GetChatHistory(ctx, dest, from, tg.MaxSearchLimit)
		if err != nil || len(page) == 0 {
			t.Fatalf("getChatHistory = %d messages, %v", len(page), err)
		}
		return page[0].ID
	}

	c := open("d")
	if got := newest(c, 0); got != first.ID {
		t.Fatalf("first look: newest %d, want %d", got.ServerID(), first.ID.ServerID())
	}
	_ = c.Close()
	later := w.Post(dest, 0, Post{Text: "later"}) // no session of "d" runs

	c = open("d")
	if got := newest(c, 0); got != first.ID {
		t.Errorf("restarted session: newest %d, want the database's last message %d (message %d was posted while it did not run)",
			got.ServerID(), first.ID.ServerID(), later.ID.ServerID())
	}
	// Read from the server, it is newer than the last message the session
	// learned through updates: TDLib drops it from the answer and fetches
	// the chat's difference instead, which brings it as updateNewMessage.
	if got := newest(c, later.ID); got != first.ID {
		t.Errorf("from message %d: newest %d, want %d (the newer one dropped as too new)", later.ID.ServerID(), got.ServerID(), first.ID.ServerID())
	}
	if got := newest(c, later.ID); got != later.ID {
		t.Errorf("from message %d after the difference: newest %d, want it", later.ID.ServerID(), got.ServerID())
	}
	if got := newest(open("fresh"), 0); got != later.ID {
		t.Errorf("new directory: newest %d, want the server's %d", got.ServerID(), later.ID.ServerID())
	}
	if err := c.OpenChat(ctx, dest); err != nil {
		t.Fatal(err)
	}
	if got := newest(c, 0); got != later.ID {
		t.Errorf("after openChat: newest %d, want %d", got.ServerID(), later.ID.ServerID())
	}
	// A message announced to a running session moves the end.
	last := w.Post(dest, 0, Post{Text: "last"})
	next[tg.ChatLastMessage](t, c, func(u tg.ChatLastMessage) bool { return u.Chat == dest && u.LastMessageID == last.ID })
	if got := newest(c, 0); got != last.ID {
		t.Errorf("after updateChatLastMessage: newest %d, want %d", got.ServerID(), last.ID.ServerID())
	}
}
