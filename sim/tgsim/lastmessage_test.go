package tgsim

import (
	"testing"

	"stashd/tg"
)

// getChat answers from the session's database (TDLib's GetChatRequest
// loads the dialog, then writes its chat object: no server request), so
// its last message is the newest that database heard of. A session
// restarted on its directory after messages were posted while none of its
// sessions ran shows the older last message, until it opens the chat
// (TDLib fetches the channel's difference and announces the new one) or a
// new message is announced. A new directory loads the chat from the server.
func TestGetChatShowsTheDatabasesLastMessage(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{Seed: 1, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	src := w.AddChat(tg.KindChannel, "src", "a")
	first := w.Post(src, 0, Post{FileName: "a.zip", Data: []byte("a")})
	ctx := t.Context()
	open := func(dir string) *Client {
		c := w.ClientIn("a", dir)
		t.Cleanup(func() { _ = c.Close() })
		if err := c.LoadChats(ctx); err != nil {
			t.Fatal(err)
		}
		return c
	}
	last := func(c *Client) tg.MessageID {
		t.Helper()
		ch, err := c.GetChat(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		return ch.LastMessageID
	}

	c := open("d")
	if got := last(c); got != first.ID {
		t.Fatalf("getChat last message %d, want %d", got.ServerID(), first.ID.ServerID())
	}
	_ = c.Close()
	later := w.Post(src, 0, Post{FileName: "b.zip", Data: []byte("b")}) // no session of "d" runs

	c = open("d")
	if got := last(c); got != first.ID {
		t.Errorf("restarted session: getChat last message %d, want the database's %d (message %d was posted while it did not run)",
			got.ServerID(), first.ID.ServerID(), later.ID.ServerID())
	}
	if got := last(open("fresh")); got != later.ID {
		t.Errorf("new directory: getChat last message %d, want the server's %d", got.ServerID(), later.ID.ServerID())
	}
	if err := c.OpenChat(ctx, src); err != nil {
		t.Fatal(err)
	}
	u := next[tg.ChatLastMessage](t, c, func(u tg.ChatLastMessage) bool { return u.Chat == src })
	if u.LastMessageID != later.ID || last(c) != later.ID {
		t.Errorf("after openChat: announced %d, getChat %d; want %d", u.LastMessageID.ServerID(), last(c).ServerID(), later.ID.ServerID())
	}
	newest := w.Post(src, 0, Post{Text: "chatter"})
	if got := last(c); got != newest.ID {
		t.Errorf("after a new message: getChat last message %d, want %d", got.ServerID(), newest.ID.ServerID())
	}
}

// An account removed from a channel learns nothing of it when its
// restarted session opens it: TDLib's open_dialog returns at once without
// read access, and a channel difference would be refused.
func TestRemovedAccountLearnsNoLastMessageOnOpen(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{Seed: 1, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	w.AddAccount("b", false)
	src := w.AddChat(tg.KindChannel, "src", "a", "b")
	first := w.Post(src, 0, Post{FileName: "a.zip", Data: []byte("a")})
	ctx := t.Context()
	open := func() *Client {
		c := w.ClientIn("a", "d")
		t.Cleanup(func() { _ = c.Close() })
		if err := c.LoadChats(ctx); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open()
	if ch, err := c.GetChat(ctx, src); err != nil || ch.LastMessageID != first.ID {
		t.Fatalf("getChat: %d, %v", ch.LastMessageID.ServerID(), err)
	}
	_ = c.Close()
	w.RemoveMember("a", src, true)
	later := w.Post(src, 0, Post{FileName: "b.zip", Data: []byte("b")})

	c = open()
	if err := c.OpenChat(ctx, src); err != nil {
		t.Fatal(err)
	}
	if ch, err := c.GetChat(ctx, src); err != nil || ch.LastMessageID != first.ID {
		t.Errorf("removed account, after openChat: getChat last message %d (%v), want the database's %d (message %d came after the removal)",
			ch.LastMessageID.ServerID(), err, first.ID.ServerID(), later.ID.ServerID())
	}
}
