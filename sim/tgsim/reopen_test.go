package tgsim

import (
	"testing"
	"time"

	"stashd/tg"
)

// TDLib fetches a chat's difference at its first openChat only
// (MessagesManager::open_dialog returns while open_count is past 1): a
// second open teaches the session nothing; what it missed offline comes
// with the reconnection.
func TestOpenChatAgainFetchesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := NewWorld(Config{Seed: 1, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	ch := w.AddChat(tg.KindChannel, "c", "a")
	first := w.Post(ch, 0, Post{Text: "first"})
	c := w.ClientIn("a", "d")
	defer c.Close()
	if err := c.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	last := func() tg.MessageID {
		t.Helper()
		got, err := c.GetChat(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		return got.LastMessageID
	}
	if err := c.OpenChat(ctx, ch); err != nil {
		t.Fatal(err)
	}
	if got := last(); got != first.ID {
		t.Fatalf("last message %d, want %d", got, first.ID)
	}
	w.Disconnect("a", time.Hour)
	later := w.Post(ch, 0, Post{Text: "later"})
	if err := c.OpenChat(ctx, ch); err != nil {
		t.Fatal(err)
	}
	if got := last(); got != first.ID {
		t.Errorf("after a second open: last message %d, want still %d", got, first.ID)
	}
	w.Reconnect("a")
	if got := last(); got != later.ID {
		t.Errorf("after the reconnection: last message %d, want %d", got, later.ID)
	}
}
