package tgsim

import (
	"testing"

	"stashd/tg"
)

// A session whose database holds a channel's document index answers a
// filtered search with an empty query from that database: a document
// another session sends later is missing from it until the session reads
// the history from the server. Without the local view (ServerView) the
// search sees it at once.
func TestLocalViewLagsForAnotherSessionsSend(t *testing.T) {
	t.Parallel()
	for _, serverView := range []bool{false, true} {
		w := NewWorld(Config{Seed: 1, ServerView: serverView, FilesDir: t.TempDir()})
		w.AddAccount("a", false)
		w.AddAccount("b", false)
		src := w.AddChat(tg.KindChannel, "src", "a", "b")
		dest := w.AddChat(tg.KindChannel, "dest", "a", "b")
		posted := w.Post(src, 0, Post{FileName: "x.zip", Data: []byte("x")})
		ctx := t.Context()
		reader := w.ClientIn("b", "reader")
		sender := w.Client("a")
		for _, c := range []*Client{reader, sender} {
			t.Cleanup(func() { _ = c.Close() })
			if err := c.LoadChats(ctx); err != nil {
				t.Fatal(err)
			}
		}
		q := tg.Search{Chat: dest, Limit: tg.MaxSearchLimit, Filter: tg.FilterDocument}
		if got, err := reader.SearchChatMessages(ctx, q); err != nil || len(got) != 0 {
			t.Fatalf("first search = %v, %v; want an empty destination", got, err)
		}
		m, err := sender.GetMessage(ctx, src, posted.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sender.SendDocument(ctx, dest, m.Document.File.RemoteID, "copy"); err != nil {
			t.Fatal(err)
		}
		next[tg.SendSucceeded](t, sender, nil)

		got, err := reader.SearchChatMessages(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 0, true: 1}[serverView]; len(got) != want {
			t.Fatalf("server view %v: search after another session's send = %d messages, want %d", serverView, len(got), want)
		}
		hist, err := reader.GetChatHistory(ctx, dest, 0, tg.MaxSearchLimit)
		if err != nil || len(hist) != 1 {
			t.Fatalf("server view %v: history = %d messages, %v; want the copy from the server", serverView, len(hist), err)
		}
		// What the history returned is in the database now.
		if got, err := reader.SearchChatMessages(ctx, q); err != nil || len(got) != 1 {
			t.Fatalf("server view %v: search after reading the history = %d messages, %v; want 1", serverView, len(got), err)
		}
		// An instance on another database directory has no index yet, and
		// asks the server.
		fresh := w.ClientIn("b", "fresh")
		t.Cleanup(func() { _ = fresh.Close() })
		if err := fresh.LoadChats(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := fresh.SearchChatMessages(ctx, q); err != nil || len(got) != 1 {
			t.Fatalf("server view %v: a fresh database's search = %d messages, %v; want 1", serverView, len(got), err)
		}
	}
}
