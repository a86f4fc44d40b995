package tdjsonsim_test

import (
	"slices"
	"testing"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// editMessageMedia reaches a session that opened the channel as
// updateMessageContent and updateMessageEdited, and getMessage then shows
// the new document.
func TestEditMessageMediaOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 21})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	c.ok(1, "openChat", map[string]any{"chat_id": w.channel}, "ok")
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "v1.zip", Data: []byte("PK one")})
	edit := w.EditMessageMedia(w.channel, posted.ID, tgsim.Post{FileName: "v2.zip", Data: []byte("PK two")})

	content, _ := c.until("updateMessageContent", func(o tdObject) bool { return o.typ() == "updateMessageContent" })
	if content.int("chat_id") != int64(w.channel) || content.int("message_id") != int64(posted.ID) {
		t.Errorf("updateMessageContent = %v", content)
	}
	edited, _ := c.until("updateMessageEdited", func(o tdObject) bool { return o.typ() == "updateMessageEdited" })
	if edited.int("message_id") != int64(posted.ID) || edited.int("edit_date") == 0 {
		t.Errorf("updateMessageEdited = %v", edited)
	}
	m := c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	if got := m.str("content", "document", "document", "remote", "unique_id"); got != edit.NewUniqueID {
		t.Errorf("getMessage after the edit shows file %q, want %q", got, edit.NewUniqueID)
	}
	if m.str("content", "document", "file_name") != "v2.zip" {
		t.Errorf("getMessage after the edit: %v", m.obj("content", "document"))
	}
	if m.int("edit_date") != edited.int("edit_date") {
		t.Errorf("getMessage after the edit: edit_date %d, want the update's %d", m.int("edit_date"), edited.int("edit_date"))
	}
}

// A public channel the account has not joined: searchPublicChat finds it
// (and TDLib announces the supergroup with status left), history is read
// from the server, and new messages arrive only once the chat is open.
func TestPublicChannelWithoutJoiningOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 22})
	pub := w.AddChat(tg.KindChannel, "public news")
	w.SetUsername(pub, "pubnews")
	old := w.Post(pub, 0, tgsim.Post{FileName: "old.zip", Data: []byte("PK old")})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	if res, _ := c.call(1, "getChat", map[string]any{"chat_id": pub}); res.typ() != "error" {
		t.Fatalf("getChat before resolving: %v, want Chat not found", res)
	}
	// The update may be written before or after the answer.
	isLeft := func(o tdObject) bool {
		return o.typ() == "updateSupergroup" && o.str("supergroup", "status", "@type") == "chatMemberStatusLeft"
	}
	res, before := c.call(1, "searchPublicChat", map[string]any{"username": "pubnews"})
	if res.typ() != "chat" || res.int("id") != int64(pub) {
		t.Fatalf("searchPublicChat = %v", res)
	}
	if !slices.ContainsFunc(before, isLeft) {
		c.until("updateSupergroup with status left", isLeft)
	}
	m := c.ok(1, "getMessage", map[string]any{"chat_id": pub, "message_id": old.ID}, "message")
	if m.str("content", "document", "file_name") != "old.zip" {
		t.Errorf("getMessage of a public channel = %v", m)
	}

	unseen := w.Post(pub, 0, tgsim.Post{FileName: "unseen.zip", Data: []byte("PK unseen")})
	c.ok(1, "openChat", map[string]any{"chat_id": pub}, "ok")
	seen := w.Post(pub, 0, tgsim.Post{FileName: "seen.zip", Data: []byte("PK seen")})
	_, before = c.until("updateNewMessage of the opened chat", func(o tdObject) bool {
		return o.typ() == "updateNewMessage" && o.int("message", "id") == int64(seen.ID)
	})
	for _, o := range before {
		if o.typ() == "updateNewMessage" && o.int("message", "id") == int64(unseen.ID) {
			t.Errorf("a message posted before openChat reached a non-member: %v", o)
		}
	}
}

// A file whose message was deleted before it was fetched cannot be
// downloaded: the download stops (neither active nor completed).
func TestDownloadOfDeletedMessageStopsOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 23})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "gone.zip", Data: []byte("PK gone")})
	m := c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	id := m.int("content", "document", "document", "id")
	w.Delete(w.channel, posted.ID)
	c.send(1, "downloadFile", downloadParams(id))
	c.until("the download stopped", func(o tdObject) bool { return stopped(o, id) })
	if res, _ := c.call(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}); res.typ() != "error" || res.int("code") != 404 {
		t.Errorf("getMessage of the deleted message = %v, want 404", res)
	}
}
