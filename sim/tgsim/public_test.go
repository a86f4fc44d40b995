package tgsim

import (
	"errors"
	"testing"

	"stashd/tg"
)

func TestSearchPublicChat(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{})
	w.AddAccount("a", false)
	ch := w.AddChat(tg.KindChannel, "News", "a")
	w.SetUsername(ch, "stashd_news")
	hidden := w.AddChat(tg.KindChannel, "Hidden", "a")
	w.SetUsername(hidden, "hidden")
	w.SetPrivate(hidden, true)
	c := w.Client("a")
	defer c.Close()
	got, err := c.SearchPublicChat(t.Context(), "Stashd_News")
	if err != nil || got.ID != ch || got.Title != "News" {
		t.Fatalf("SearchPublicChat = %+v, %v; want the channel", got, err)
	}
	if _, err := c.SearchPublicChat(t.Context(), "nobody"); !errors.Is(err, tg.ErrChatNotFound) {
		t.Errorf("unknown name: %v, want chat not found", err)
	}
	if _, err := c.SearchPublicChat(t.Context(), "hidden"); tg.Classify(err) != tg.ClassPermanent {
		t.Errorf("private chat: %v, want a permanent error", err)
	}
	if n := w.Calls("a")[tg.MethodSearchPublicChat]; n != 3 {
		t.Errorf("counted %d calls, want 3", n)
	}
}
