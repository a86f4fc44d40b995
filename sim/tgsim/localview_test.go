package tgsim

import (
	"slices"
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

// getMessage answers from the session's database when it holds the
// message, with the content it stored: an edit the session did not hear
// of (it does not follow the chat) leaves the answer stale, edit date
// included. Opening the chat (TDLib fetches its difference) and a download
// that finds the file gone (file reference repair) bring it up to date; a
// session that follows the chat hears of the edit at once. Without the
// local view (ServerView) every answer is the server's.
func TestGetMessageAnswersFromTheDatabase(t *testing.T) {
	t.Parallel()
	for _, serverView := range []bool{false, true} {
		w := NewWorld(Config{Seed: 1, ServerView: serverView, FilesDir: t.TempDir()})
		w.AddAccount("a", false)
		src := w.AddChat(tg.KindChannel, "src", "a")
		ctx := t.Context()
		c, listener := w.ClientIn("a", "one"), w.ClientIn("a", "two")
		for _, cl := range []*Client{c, listener} {
			t.Cleanup(func() { _ = cl.Close() })
			if err := cl.LoadChats(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := listener.OpenChat(ctx, src); err != nil {
			t.Fatal(err)
		}
		get := func(cl *Client, id tg.MessageID) tg.Message {
			t.Helper()
			m, err := cl.GetMessage(ctx, src, id)
			if err != nil || m.Document == nil {
				t.Fatalf("getMessage = %+v, %v", m, err)
			}
			return m
		}
		first := w.Post(src, 0, Post{FileName: "one-old.zip", Data: []byte("1")})
		second := w.Post(src, 0, Post{FileName: "two-old.zip", Data: []byte("2")})
		old := get(c, first.ID)
		get(c, second.ID)
		get(listener, first.ID)
		e1 := w.EditMessageMedia(src, first.ID, Post{FileName: "one-new.zip", Data: []byte("1'")})
		w.EditMessageMedia(src, second.ID, Post{FileName: "two-new.zip", Data: []byte("2'")})

		if m := get(listener, first.ID); m.Document.File.UniqueID != e1.NewUniqueID || m.EditDate.IsZero() {
			t.Fatalf("server view %v: a following session reads %+v; want the edit", serverView, m)
		}
		m := get(c, first.ID)
		if stale := m.Document.File.UniqueID == e1.OldUniqueID && m.EditDate.IsZero(); stale == serverView {
			t.Fatalf("server view %v: a session not following the chat reads %q edited %v", serverView, m.Document.FileName, m.EditDate)
		}
		// The old file's download stops, and the repair reads the
		// message again.
		if _, err := c.DownloadFile(ctx, old.Document.File.ID); err != nil {
			t.Fatal(err)
		}
		if m := get(c, first.ID); m.Document.File.UniqueID != e1.NewUniqueID {
			t.Fatalf("server view %v: after the failed download, read %q; want the new document", serverView, m.Document.FileName)
		}
		if m := get(c, second.ID); (m.Document.FileName == "two-old.zip") == serverView {
			t.Fatalf("server view %v: the other message read as %q", serverView, m.Document.FileName)
		}
		if err := c.OpenChat(ctx, src); err != nil {
			t.Fatal(err)
		}
		if m := get(c, second.ID); m.Document.FileName != "two-new.zip" {
			t.Fatalf("server view %v: after opening the chat, read %q; want the new document", serverView, m.Document.FileName)
		}
	}
}

// A channel's difference brings the deletions and edits a session missed,
// unless it is too long: TDLib then learns the last message alone, and
// the messages its database holds stay as they were, a deleted one still
// readable by getMessage and an edited one stale, until something reads
// them from the server again.
func TestTooLongDifferenceLeavesTheDatabaseAsItWas(t *testing.T) {
	t.Parallel()
	for _, tooLong := range []bool{false, true} {
		w := NewWorld(Config{Seed: 1, ChannelGap: 5, FilesDir: t.TempDir()})
		w.AddAccount("a", false)
		src := w.AddChat(tg.KindChannel, "src", "a")
		ctx := t.Context()
		c := w.Client("a")
		t.Cleanup(func() { _ = c.Close() })
		if err := c.LoadChats(ctx); err != nil {
			t.Fatal(err)
		}
		gone := w.Post(src, 0, Post{FileName: "gone.zip", Data: []byte("1")})
		edited := w.Post(src, 0, Post{FileName: "old.zip", Data: []byte("2")})
		for _, m := range []tg.Message{gone, edited} {
			if _, err := c.GetMessage(ctx, src, m.ID); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.GetChat(ctx, src); err != nil { // the database's last message
			t.Fatal(err)
		}
		docs := tg.Search{Chat: src, Limit: tg.MaxSearchLimit, Filter: tg.FilterDocument}
		if _, err := c.SearchChatMessages(ctx, docs); err != nil { // the database's index, whole
			t.Fatal(err)
		}
		w.Delete(src, gone.ID)
		w.EditMessageMedia(src, edited.ID, Post{FileName: "new.zip", Data: []byte("2'")})
		n := 5 // a channel gap's worth
		if tooLong {
			n = 6
		}
		posted := postN(w, src, 0, n, "later")
		if err := c.OpenChat(ctx, src); err != nil {
			t.Fatal(err)
		}
		last := posted[len(posted)-1].ID
		got := collectUntil(t, c, isLastMessage(src, last))
		heardDeleted := slices.ContainsFunc(got, func(u tg.Update) bool {
			d, ok := u.(tg.MessagesDeleted)
			return ok && d.Chat == src && slices.Contains(d.IDs, gone.ID)
		})
		if news := newMessages(got, src); tooLong != (len(news) == 0) {
			t.Errorf("too long %v: the difference brought %d new messages as updateNewMessage", tooLong, len(news))
		}
		if heardDeleted == tooLong {
			t.Errorf("too long %v: the deletion announced: %v", tooLong, heardDeleted)
		}
		_, err := c.GetMessage(ctx, src, gone.ID)
		if readable := err == nil; readable != tooLong {
			t.Errorf("too long %v: getMessage of the deleted message: %v", tooLong, err)
		}
		m, err := c.GetMessage(ctx, src, edited.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stale := m.Document.FileName == "old.zip"; stale != tooLong {
			t.Errorf("too long %v: getMessage of the edited message reads %q", tooLong, m.Document.FileName)
		}
		if chat, err := c.GetChat(ctx, src); err != nil || chat.LastMessageID != last {
			t.Errorf("too long %v: getChat = %+v, %v; want the last message %d", tooLong, chat, err, last)
		}
		// The next instance on the directory, not following the chat,
		// searches it: from the index the difference kept current, or,
		// the index forgotten, from the server; neither has the deleted
		// message.
		_ = c.Close()
		next := w.Client("a")
		t.Cleanup(func() { _ = next.Close() })
		if err := next.LoadChats(ctx); err != nil {
			t.Fatal(err)
		}
		found, err := next.SearchChatMessages(ctx, docs)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(found, func(m tg.Message) bool { return m.ID == gone.ID }) {
			t.Errorf("too long %v: the next instance's search finds the deleted message", tooLong)
		}
	}
}
