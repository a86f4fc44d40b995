package tdjsonsim_test

import (
	"path/filepath"
	"slices"
	"testing"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// sendCopy sends the document of message m to chat with caption on
// client 1 and returns the id of the message that landed.
func sendCopy(c *wire, chat tg.ChatID, m tdObject, caption string) int64 {
	c.t.Helper()
	tmp := c.ok(1, "sendMessage", map[string]any{
		"chat_id": chat, "message_thread_id": 0, "reply_to": nil, "options": nil, "reply_markup": nil,
		"input_message_content": map[string]any{
			"@type":    "inputMessageDocument",
			"document": map[string]any{"@type": "inputFileRemote", "id": m.str("content", "document", "document", "remote", "id")},
			"caption":  map[string]any{"@type": "formattedText", "text": caption, "entities": []any{}},
		},
	}, "message")
	ok, _ := c.until("send outcome", func(o tdObject) bool {
		return o.typ() == "updateMessageSendSucceeded" && o.int("old_message_id") == tmp.int("id")
	})
	return ok.int("message", "id")
}

// deleteMessages is answered ok and followed by updateDeleteMessages for
// what went; a message another sender posted fails with TDLib's 400
// "Message can't be deleted" and stays.
func TestDeleteMessagesOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 17})
	c, m := wireWithDocument(t, w)
	sent := sendCopy(c, w.dest, m, "d.zip\nstashd:77")

	if res := c.ok(1, "deleteMessages", map[string]any{"chat_id": w.channel, "message_ids": []int64{m.int("id")}, "revoke": true}, "error"); res.int("code") != 400 || res.str("message") != "Message can't be deleted" {
		t.Errorf("deleteMessages of another sender's message: %v", res)
	}
	if got := len(w.Messages(w.channel)); got != 1 {
		t.Errorf("the channel holds %d messages after a refused delete, want 1", got)
	}

	// The update may be written before or after the answer.
	isDelete := func(o tdObject) bool { return o.typ() == "updateDeleteMessages" }
	res, before := c.call(1, "deleteMessages", map[string]any{"chat_id": w.dest, "message_ids": []int64{sent}, "revoke": true})
	if res.typ() != "ok" {
		t.Fatalf("deleteMessages of its own message: %v, want ok", res)
	}
	var del tdObject
	if i := slices.IndexFunc(before, isDelete); i >= 0 {
		del = before[i]
	} else {
		del, _ = c.until("updateDeleteMessages", isDelete)
	}
	ids, _ := del.get("message_ids").([]any)
	if del.int("chat_id") != int64(w.dest) || len(ids) != 1 || del.get("is_permanent") != true || del.get("from_cache") != false {
		t.Errorf("updateDeleteMessages = %v, want permanent [%d] in %d", del, sent, w.dest)
	}
	if got := w.Messages(w.dest); len(got) != 0 {
		t.Errorf("the destination still holds %v", got)
	}
	if got := w.Calls("acct1")[tg.MethodDeleteMessages]; got != 2 {
		t.Errorf("deleteMessages counted %d times, want 2", got)
	}
}

// A deletion made elsewhere reaches a session's database only through an
// update: a session that does not follow the channel (it never opened it)
// answers getMessage from its database with the deleted message, until
// opening the chat fetches the difference, which announces the deletion
// (updateDeleteMessages) and forgets the message.
func TestDeletedElsewhereStaysInTheDatabaseUntilItsUpdate(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 29})
	_, path := startServer(t, w.World)
	m := w.Post(w.channel, 0, tgsim.Post{Text: "soon deleted"})
	c := dialWire(t, path)
	c.login(1, filepath.Join(w.dir, "instance1"), "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	get := map[string]any{"chat_id": w.channel, "message_id": m.ID}
	c.ok(1, "getMessage", get, "message")

	w.Delete(w.channel, m.ID)
	if got := c.ok(1, "getMessage", get, "message"); got.int("id") != int64(m.ID) {
		t.Errorf("getMessage after a deletion the session has not heard of: %v, want its database's copy", got)
	}

	deleted := func(o tdObject) bool {
		ids, _ := o.get("message_ids").([]any)
		return o.typ() == "updateDeleteMessages" && o.int("chat_id") == int64(w.channel) && len(ids) == 1 &&
			tdObject{"id": ids[0]}.int("id") == int64(m.ID) && o.get("is_permanent") == true
	}
	opened, seen := c.call(1, "openChat", map[string]any{"chat_id": w.channel})
	if opened.typ() != "ok" {
		t.Fatalf("openChat: %v", opened)
	}
	if !slices.ContainsFunc(seen, deleted) {
		c.until("updateDeleteMessages", deleted)
	}
	if res, _ := c.call(1, "getMessage", get); res.typ() != "error" || res.int("code") != 404 {
		t.Errorf("getMessage once the deletion is in: %v, want a 404", res)
	}
}
