package tgsim

import (
	"testing"

	"stashd/tg"
)

// Config.ServerView answers every request from the server's truth, as if
// no session had a database of its own: no message is hidden as newer
// than the last one a database learned, whether read by id, by history or
// by search.
func TestServerViewHidesNoTooNewMessage(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{Seed: 1, FilesDir: t.TempDir(), ServerView: true})
	w.AddAccount("a", false)
	ch := w.AddChat(tg.KindChannel, "chan", "a")
	w.Post(ch, 0, Post{Text: "first"})
	ctx := t.Context()
	c := w.ClientIn("a", "d")
	if err := c.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetChat(ctx, ch); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	later := w.Post(ch, 0, Post{FileName: "x.zip", Data: []byte("PK")})

	c = w.ClientIn("a", "d")
	t.Cleanup(func() { _ = c.Close() })
	if err := c.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetMessage(ctx, ch, later.ID); err != nil {
		t.Errorf("getMessage of the newest message: %v, want it", err)
	}
	page, err := c.GetChatHistory(ctx, ch, later.ID, 10)
	if err != nil || len(page) == 0 || page[0].ID != later.ID {
		t.Errorf("getChatHistory from the newest message: %d messages, %v; want it first", len(page), err)
	}
}
