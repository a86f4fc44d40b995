package tdjsonsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"stashd/tg"
)

// The adapter's fixtures (tg/tdlib/testdata) are TDLib 1.8.40's own JSON.
// These tests hold the server's JSON against them: every member it writes
// exists in TDLib's object with the same JSON type (no invented fields, no
// int64 written as a number), and every member of TDLib's object is
// written, except those listed as not simulated.

const fixtures = "../../tg/tdlib/testdata"

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// shape maps each member path of a JSON document to its JSON type; the
// elements of an array are all described by its first one.
func shape(t *testing.T, data []byte) map[string]string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	out := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			out[path] = "object"
			for k, e := range v {
				walk(strings.TrimPrefix(path+"."+k, "."), e)
			}
		case []any:
			out[path] = "array"
			if len(v) > 0 {
				walk(path+"[]", v[0])
			}
		case string:
			out[path] = "string"
		case json.Number:
			out[path] = "number"
		case bool:
			out[path] = "bool"
		case nil:
			out[path] = "null"
		}
	}
	walk("", v)
	delete(out, "")
	return out
}

// sameShape compares ours with TDLib's fixture. skip lists members (and
// everything under them) left out of the comparison on both sides: what
// the server does not write, or writes as another of TDLib's variants.
func sameShape(t *testing.T, name string, ours object, skip ...string) {
	t.Helper()
	data, err := json.Marshal(ours)
	if err != nil {
		t.Fatal(err)
	}
	got, want := shape(t, data), shape(t, fixture(t, name))
	delete(want, "@extra")
	skipped := func(path string) bool {
		for _, p := range skip {
			if path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[]") {
				return true
			}
		}
		return false
	}
	for path, typ := range got {
		w, ok := want[path]
		switch {
		case skipped(path):
		case !ok:
			t.Errorf("%s: we write %s, which TDLib does not", name, path)
		case w != typ:
			t.Errorf("%s: %s is a %s, TDLib writes a %s", name, path, typ, w)
		}
	}
	for path := range want {
		if _, ok := got[path]; !ok && !skipped(path) {
			t.Errorf("%s: TDLib writes %s, we do not", name, path)
		}
	}
}

// sameJSON compares ours with the fixture exactly.
func sameJSON(t *testing.T, name string, ours object) {
	t.Helper()
	got, err := json.Marshal(ours)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(fixture(t, name), &b); err != nil {
		t.Fatal(err)
	}
	if m, ok := b.(map[string]any); ok {
		delete(m, "@extra")
	}
	ga, _ := json.Marshal(a)
	gb, _ := json.Marshal(b)
	if !bytes.Equal(ga, gb) {
		t.Errorf("%s:\n ours  %s\n TDLib %s", name, ga, gb)
	}
}

func documentMessage() tg.Message {
	return tg.Message{
		ID: tg.MessageIDFromServer(1101), ChatID: -1001987654321, Date: time.Unix(1731686400, 0),
		AlbumID: 13826541201432577, Caption: "November backup",
		Document: &tg.Document{FileName: "backup-2024-11.zip", MimeType: "application/zip", File: tg.File{
			ID: 512, Size: 73400320, RemoteID: "BQAC", UniqueID: "AgAD", LocalPath: "/files/backup-2024-11.zip",
			Downloaded: 73400320, DownloadDone: true,
		}},
	}
}

// Members of TDLib's message the simulator has no value for. sender_id is
// always the chat (messageSenderChat), where TDLib also writes a user.
var messageSkipped = []string{"interaction_info", "reply_to", "sender_id"}

func prefixed(prefix string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = prefix + p
	}
	return out
}

func TestObjectsHaveTDLibsShape(t *testing.T) {
	t.Parallel()
	m := documentMessage()
	sameShape(t, "message_document.json", messageObject(m, messageOptions{}), messageSkipped...)
	sameShape(t, "message_topic.json", messageObject(tg.Message{ID: 1 << 20, ChatID: -1002123456789, ThreadID: 3 << 20, IsTopicMessage: true, Document: m.Document}, messageOptions{}),
		messageSkipped...)
	sameShape(t, "found_chat_messages.json", foundChatMessagesObject([]tg.Message{m}), prefixed("messages[].", messageSkipped)...)
	// The simulator knows only the id of a chat's last message; messages
	// are compared whole above.
	sameShape(t, "chat_channel.json", chatObject(tg.Chat{ID: -1001987654321, Kind: tg.KindChannel, Title: "Backups", LastMessageID: m.ID}),
		prefixed("last_message.", messageSkipped)...)
	// TDLib leaves out a null member: a chat without a last message has none.
	sameShape(t, "chat_supergroup.json", chatObject(tg.Chat{ID: -1002123456789, Kind: tg.KindSupergroup, Title: "Archive exchange"}))
	sameShape(t, "supergroup_forum.json", supergroupObject(2123456789, tg.KindForum), "usernames")
	sameShape(t, "user.json", userObject(tg.User{ID: 6012345678, Username: "stash_mirror", IsPremium: true}), "status")
	sameShape(t, "forum_topic.json", forumTopicObject(tg.Topic{ChatID: -1002123456789, ThreadID: 3 << 20, Name: "Sources"}),
		"notification_settings", "info.creator_id")
	sameJSON(t, "error_429.json", errorFor(&tg.FloodWaitError{RetryAfter: 17 * time.Second}))
	sameJSON(t, "error_400_channel_private.json", errorFor(tg.Permanent(&tg.Error{Code: 400, Message: "CHANNEL_PRIVATE"})))
	sameJSON(t, "error_400_chat_not_found.json", errorFor(tg.ErrChatNotFound))
	sameJSON(t, "error_404.json", errorFor(tg.ErrMessageNotFound))
	sameJSON(t, "error_500_request_aborted.json", errorFor(errAborted))
	sameJSON(t, "option_version.json", optionValueObject("version", "1.8.40"))
}

func TestUpdatesHaveTDLibsShape(t *testing.T) {
	t.Parallel()
	m := documentMessage()
	update := func(u tg.Update, failed *tg.Message) object {
		t.Helper()
		o, err := updateObject(u, failed)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	sameShape(t, "update_new_message.json", update(tg.NewMessage{Message: m}, nil), prefixed("message.", messageSkipped)...)
	sameShape(t, "update_send_succeeded.json", update(tg.SendSucceeded{Message: m, OldMessageID: m.ID + 9}, nil),
		prefixed("message.", messageSkipped)...)
	sameShape(t, "update_send_failed.json",
		update(tg.SendFailed{Chat: m.ChatID, OldMessageID: m.ID + 9, Err: tg.Permanent(&tg.Error{Code: 400, Message: "CHAT_ADMIN_REQUIRED"})}, &m),
		prefixed("message.", messageSkipped)...)
	sameShape(t, "update_send_failed_429.json",
		update(tg.SendFailed{Chat: m.ChatID, OldMessageID: m.ID + 9, Err: &tg.FloodWaitError{RetryAfter: 17 * time.Second,
			Err: &tg.Error{Code: 429, Message: "Too Many Requests: retry after 17"}}}, &m),
		prefixed("message.", messageSkipped)...)
	sameJSON(t, "update_delete_messages.json", update(tg.MessagesDeleted{Chat: -1001555000111, IDs: []tg.MessageID{2097152009}, IsPermanent: true}, nil))
	sameShape(t, "update_chat_last_message.json", update(tg.ChatLastMessage{Chat: m.ChatID, LastMessageID: m.ID}, nil),
		"positions", "last_message.interaction_info")
	sameJSON(t, "update_chat_last_message_empty.json", update(tg.ChatLastMessage{Chat: -1001987654321}, nil))
	sameShape(t, "update_file_done.json", update(tg.FileUpdated{File: m.Document.File}, nil))
	sameShape(t, "update_file_progress.json", update(tg.FileUpdated{File: tg.File{ID: 512, Size: 10, Downloaded: 3, DownloadActive: true}}, nil))
	sameShape(t, "update_forum_topic_info.json", update(tg.ForumTopicInfo{Topic: tg.Topic{ChatID: -1002123456789, ThreadID: 3 << 20, Name: "Sources"}}, nil),
		"info.creator_id")
	sameShape(t, "update_message_content.json", update(tg.MessageContentChanged{Chat: m.ChatID, Message: m.ID}, nil), "new_content.text")
	sameShape(t, "update_supergroup_member.json", update(tg.ChatAccessHeld{Chat: -1001987654321}, nil))
	sameShape(t, "update_basic_group_upgraded.json", update(tg.ChatUpgraded{From: -4012345678, To: -1002123456789}, nil))
	sameShape(t, "update_basic_group.json", update(tg.ChatAccessHeld{Chat: -4012345678}, nil))
	sameShape(t, "update_basic_group_banned.json", update(tg.ChatAccessLost{Chat: -4012345678}, nil))
	sameShape(t, "update_new_message_upgrade_to.json",
		update(tg.NewMessage{Message: tg.Message{ID: 7 << 20, ChatID: -4012345678, Date: m.Date, UpgradedTo: -1002123456789}}, nil),
		prefixed("message.", messageSkipped)...)
	sameJSON(t, "update_connection_state.json", update(tg.ConnectionStateChanged{State: tg.ConnWaitingForNetwork}, nil))
	sameJSON(t, "update_option_version.json", update(tg.OptionChanged{Name: "version", Value: "1.8.40"}, nil))
	sameJSON(t, "update_option_integer.json", update(tg.OptionChanged{Name: "message_caption_length_max", Value: "1024"}, nil))
	sameJSON(t, "update_option_boolean.json", update(tg.OptionChanged{Name: "can_ignore_sensitive_content_restrictions", Value: "true"}, nil))
	sameJSON(t, "update_option_empty.json", update(tg.OptionChanged{Name: "authentication_token", Value: ""}, nil))
}

func TestErrorFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err     error
		code    int
		message string
	}{
		{&tg.FloodWaitError{RetryAfter: 1500 * time.Millisecond, Err: &tg.Error{Code: 429, Message: "Too Many Requests: retry after 2"}}, 429, "Too Many Requests: retry after 2"},
		{&tg.FloodWaitError{RetryAfter: 1500 * time.Millisecond}, 429, "Too Many Requests: retry after 2"},
		{tg.ErrClosed, 500, "Request aborted"},
		{errors.New("disk full"), 500, "disk full"},
	} {
		o := errorFor(tc.err)
		if i := slices.IndexFunc(o, func(m member) bool { return m.key == "code" }); o[i].val != tc.code {
			t.Errorf("%v: code %v, want %d", tc.err, o[i].val, tc.code)
		}
		if i := slices.IndexFunc(o, func(m member) bool { return m.key == "message" }); o[i].val != tc.message {
			t.Errorf("%v: message %v, want %q", tc.err, o[i].val, tc.message)
		}
	}
}
