package tdjsonsim_test

import (
	"slices"
	"testing"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// deleteMessages is answered ok and followed by updateDeleteMessages for
// what went; a message another sender posted fails with TDLib's 400
// "Message can't be deleted" and stays.
func TestDeleteMessagesOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 17})
	c, m := wireWithDocument(t, w)
	tmp := c.ok(1, "sendMessage", map[string]any{
		"chat_id": w.dest, "message_thread_id": 0, "reply_to": nil, "options": nil, "reply_markup": nil,
		"input_message_content": map[string]any{
			"@type":    "inputMessageDocument",
			"document": map[string]any{"@type": "inputFileRemote", "id": m.str("content", "document", "document", "remote", "id")},
			"caption":  map[string]any{"@type": "formattedText", "text": "d.zip\nstashd:77", "entities": []any{}},
		},
	}, "message")
	ok, _ := c.until("send outcome", func(o tdObject) bool {
		return o.typ() == "updateMessageSendSucceeded" && o.int("old_message_id") == tmp.int("id")
	})
	sent := ok.int("message", "id")

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
