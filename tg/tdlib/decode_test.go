package tdlib

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"stashd/tg"
)

// fixture reads testdata/name: TDLib 1.8.40 JSON as TDLib writes it.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

const (
	channel = tg.ChatID(-1001987654321)
	forum   = tg.ChatID(-1002123456789)
	dest    = tg.ChatID(-1001555000111)
)

// backupZip is the file of message_document.json, not downloaded.
func backupZip() tg.File {
	return tg.File{
		ID:       512,
		Size:     73400320,
		RemoteID: "BQACAgQAAx0Cdj2rsQACBE1nN8QW1f2x9c8vXkq1mZk0o3pYxQACxQ4AAm9PaUnGHr7zM6c5rTYE",
		UniqueID: "AgADxQ4AAm9PaUk",
	}
}

func TestDecodeMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture string
		want    tg.Message
	}{{
		fixture: "message_document.json",
		want: tg.Message{
			ID:      tg.MessageIDFromServer(1101),
			ChatID:  channel,
			Date:    time.Date(2024, 11, 15, 16, 0, 0, 0, time.UTC),
			Caption: "November backup",
			Document: &tg.Document{
				FileName: "backup-2024-11.zip",
				MimeType: "application/zip",
				File:     backupZip(),
			},
		},
	}, {
		// An album member: media_album_id is an int64, which TDLib writes
		// as a string. Its file is downloaded already.
		fixture: "message_album.json",
		want: tg.Message{
			ID:      tg.MessageIDFromServer(1102),
			ChatID:  channel,
			Date:    time.Date(2024, 11, 15, 16, 1, 2, 0, time.UTC),
			AlbumID: 13826541201432577,
			Document: &tg.Document{
				FileName: "photos.part2.rar",
				MimeType: "application/vnd.rar",
				File: tg.File{
					ID:           514,
					Size:         2097152000,
					RemoteID:     "BQACAgQAAx0Cdj2rsQACBE5nN8Rf0aQz3u4b7y2r1Xc9mHn0AAK2EAACb09pSd0rBlZ4c5HyNgQ",
					UniqueID:     "AgADthAAAm9PaUk",
					LocalPath:    "/var/lib/stashd/accounts/main/files/documents/photos.part2.rar",
					Downloaded:   2097152000,
					DownloadDone: true,
				},
			},
		},
	}, {
		// A forum topic message: the topic is message_thread_id because
		// is_topic_message is set. Its size is not known exactly yet, and a
		// partial download's path is not reported.
		fixture: "message_topic.json",
		want: tg.Message{
			ID:             tg.MessageIDFromServer(46),
			ChatID:         forum,
			Date:           time.Date(2024, 11, 15, 17, 0, 0, 0, time.UTC),
			EditDate:       time.Date(2024, 11, 15, 17, 0, 42, 0, time.UTC), // its caption was edited
			ThreadID:       int64(tg.MessageIDFromServer(3)),                // the topic's first message
			IsTopicMessage: true,
			Caption:        "sources, part 1 of 3",
			Document: &tg.Document{
				FileName: "sources.7z.001",
				MimeType: "application/octet-stream",
				File: tg.File{
					ID:             733,
					Size:           524288000,
					RemoteID:       "BQACAgQAAx0EcN5fjQACAuBnN9HBj1m3kK5o0s8AAZlCgB9VqgACJRMAAm9PcUkn8kq8P0Wm9DYE",
					UniqueID:       "AgADJRMAAm9PcUk",
					Downloaded:     131072,
					DownloadActive: true,
				},
			},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			got, err := decodeMessage(fixture(t, tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
				if got.Document != nil && tt.want.Document != nil {
					t.Errorf("document got  %+v\ndocument want %+v", *got.Document, *tt.want.Document)
				}
			}
		})
	}
}

func TestDecodeMessageTopic(t *testing.T) {
	t.Parallel()
	m, err := decodeMessage(fixture(t, "message_topic.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.TopicID(); got != 3145728 {
		t.Errorf("TopicID = %d, want 3145728", got)
	}
	if got := m.ID.ServerID(); got != 46 {
		t.Errorf("ServerID = %d, want 46", got)
	}
	plain, err := decodeMessage(fixture(t, "message_document.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.TopicID(); got != 0 {
		t.Errorf("TopicID of a channel post = %d, want 0", got)
	}
}

func TestDecodeMessageRejectsOtherTypes(t *testing.T) {
	t.Parallel()
	if _, err := decodeMessage(fixture(t, "chat_channel.json")); err == nil {
		t.Error("decoding a chat as a message succeeded")
	}
	if _, err := decodeMessage([]byte(`{"@type":"message","id":"x"}`)); err == nil {
		t.Error("decoding a non-numeric id succeeded")
	}
}

func TestDecodeMessages(t *testing.T) {
	t.Parallel()
	got, err := decodeMessages(fixture(t, "found_chat_messages.json"))
	if err != nil {
		t.Fatal(err)
	}
	// searchChatMessages answers newest first, and the order is kept.
	want := []tg.MessageID{tg.MessageIDFromServer(1102), tg.MessageIDFromServer(1101)}
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].ID != want[i] {
			t.Errorf("message %d: id %d, want %d", i, got[i].ID, want[i])
		}
		if got[i].Document == nil {
			t.Errorf("message %d: no document", i)
		}
	}
	if got[0].AlbumID != 13826541201432577 {
		t.Errorf("album id %d", got[0].AlbumID)
	}

	// getMessages answers null for a message it cannot find.
	got, err = decodeMessages([]byte(`{"@type":"messages","total_count":2,"messages":[null,{"@type":"message","id":1048576,"chat_id":-1001,"content":{"@type":"messageText"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != tg.MessageIDFromServer(1) || got[0].Document != nil {
		t.Errorf("messages with a null: got %+v", got)
	}
}

func TestDecodeUpdate(t *testing.T) {
	t.Parallel()
	sent := tg.Message{
		ID:      tg.MessageIDFromServer(2001),
		ChatID:  dest,
		Date:    time.Unix(1731700123, 0).UTC(),
		Caption: "backup-2024-11.zip\nstashd:6f1c0e2a9b7d4c35",
		Document: &tg.Document{
			FileName: "backup-2024-11.zip",
			MimeType: "application/zip",
			File: tg.File{
				ID:       901,
				Size:     73400320,
				RemoteID: "BQACAgQAAx0Cc8zB6wADDGc3-0v7b5W2Qm3a1Vd0cKj9eYjcAALFDgACb09pSV9Qn8rH7UjMNgQ",
				// The same bytes keep their unique id in the destination.
				UniqueID: "AgADxQ4AAm9PaUk",
			},
		},
	}
	progress := backupZip()
	progress.Downloaded = 31457280
	progress.DownloadActive = true
	// A failed or cancelled download: neither active nor complete.
	stopped := backupZip()
	stopped.Downloaded = 31457280
	done := backupZip()
	done.Downloaded = 73400320
	done.DownloadDone = true
	done.LocalPath = "/var/lib/stashd/accounts/main/files/documents/backup-2024-11.zip"

	tests := []struct {
		fixture string
		want    tg.Update
	}{
		{"update_send_succeeded.json", tg.SendSucceeded{Message: sent, OldMessageID: 2097152009}},
		{"update_chat_last_message.json", tg.ChatLastMessage{Chat: channel, LastMessageID: tg.MessageIDFromServer(1103)}},
		{"update_chat_last_message_empty.json", tg.ChatLastMessage{Chat: channel}},
		{"update_connection_state.json", tg.ConnectionStateChanged{State: tg.ConnWaitingForNetwork}},
		{"update_file_progress.json", tg.FileUpdated{File: progress}},
		{"update_file_done.json", tg.FileUpdated{File: done}},
		{"update_file_stopped.json", tg.FileUpdated{File: stopped}},
		{"update_option_version.json", tg.OptionChanged{Name: "version", Value: "1.8.40"}},
		{"update_option_integer.json", tg.OptionChanged{Name: "message_caption_length_max", Value: "1024"}},
		{"update_option_boolean.json", tg.OptionChanged{Name: "can_ignore_sensitive_content_restrictions", Value: "true"}},
		{"update_option_empty.json", tg.OptionChanged{Name: "authentication_token", Value: ""}},
		{"update_forum_topic_info.json", tg.ForumTopicInfo{Topic: tg.Topic{ChatID: forum, ThreadID: 3145728, Name: "Sources"}}},
		{"update_message_content.json", tg.MessageContentChanged{Chat: channel, Message: tg.MessageIDFromServer(1101)}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			got, ok, err := decodeUpdate(fixture(t, tt.fixture))
			if err != nil || !ok {
				t.Fatalf("decodeUpdate: ok %v, err %v", ok, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestDecodeUpdateNewMessage(t *testing.T) {
	t.Parallel()
	u, ok, err := decodeUpdate(fixture(t, "update_new_message.json"))
	if err != nil || !ok {
		t.Fatalf("decodeUpdate: ok %v, err %v", ok, err)
	}
	nm, isNew := u.(tg.NewMessage)
	if !isNew {
		t.Fatalf("got %T, want tg.NewMessage", u)
	}
	want, err := decodeMessage(fixture(t, "message_document.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(nm.Message, want) {
		t.Errorf("got %+v, want %+v", nm.Message, want)
	}
}

func TestDecodeUpdateSendFailed(t *testing.T) {
	t.Parallel()
	u, ok, err := decodeUpdate(fixture(t, "update_send_failed.json"))
	if err != nil || !ok {
		t.Fatalf("decodeUpdate: ok %v, err %v", ok, err)
	}
	f, isFailed := u.(tg.SendFailed)
	if !isFailed {
		t.Fatalf("got %T, want tg.SendFailed", u)
	}
	// The temporary id is what the sender waits on; it is not a server id.
	if f.Chat != dest || f.OldMessageID != 2097152009 || f.OldMessageID.IsServer() {
		t.Errorf("got chat %d, old id %d", f.Chat, f.OldMessageID)
	}
	var te *tg.Error
	if !errors.As(f.Err, &te) || te.Code != 400 || te.Message != "CHAT_ADMIN_REQUIRED" {
		t.Errorf("error %v, want telegram 400 CHAT_ADMIN_REQUIRED", f.Err)
	}
	if c := tg.Classify(f.Err); c != tg.ClassPermanent {
		t.Errorf("class %q, want permanent", c)
	}
}

func TestDecodeUpdateIgnoresOthers(t *testing.T) {
	t.Parallel()
	u, ok, err := decodeUpdate(fixture(t, "update_user.json"))
	if err != nil || ok || u != nil {
		t.Errorf("updateUserStatus: got %v, %v, %v; want nothing", u, ok, err)
	}
	if _, _, err := decodeUpdate([]byte(`{"@type":"updateNewMessage"}`)); err == nil {
		t.Error("updateNewMessage without a message decoded")
	}
	if _, _, err := decodeUpdate([]byte(`{"@type":"updateConnectionState","state":{"@type":"somethingElse"}}`)); err == nil {
		t.Error("unknown connection state decoded")
	}
}

func TestConnectionStates(t *testing.T) {
	t.Parallel()
	for typ, want := range map[string]tg.ConnectionState{
		"connectionStateWaitingForNetwork": tg.ConnWaitingForNetwork,
		"connectionStateConnectingToProxy": tg.ConnConnectingToProxy,
		"connectionStateConnecting":        tg.ConnConnecting,
		"connectionStateUpdating":          tg.ConnUpdating,
		"connectionStateReady":             tg.ConnReady,
	} {
		got, err := connectionState(typ)
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", typ, got, err, want)
		}
	}
}

func TestDecodeChat(t *testing.T) {
	t.Parallel()
	c, supergroup, err := decodeChat(fixture(t, "chat_channel.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := tg.Chat{ID: channel, Kind: tg.KindChannel, Title: "Backups", LastMessageID: tg.MessageIDFromServer(1103)}
	if c != want || supergroup != 0 {
		t.Errorf("channel: got %+v (supergroup %d), want %+v", c, supergroup, want)
	}

	c, supergroup, err = decodeChat(fixture(t, "chat_supergroup.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Only the supergroup object tells a forum apart.
	want = tg.Chat{ID: forum, Kind: tg.KindSupergroup, Title: "Archive exchange"}
	if c != want || supergroup != 2123456789 {
		t.Errorf("supergroup: got %+v (supergroup %d), want %+v", c, supergroup, want)
	}
	isForum, err := decodeSupergroupIsForum(fixture(t, "supergroup_forum.json"))
	if err != nil || !isForum {
		t.Errorf("is_forum: got %v, %v", isForum, err)
	}

	c, _, err = decodeChat([]byte(`{"@type":"chat","id":6012345678,"type":{"@type":"chatTypePrivate","user_id":6012345678},"title":"Stash"}`))
	if err != nil || c.Kind != tg.KindPrivate {
		t.Errorf("private chat: got %+v, %v", c, err)
	}
	// A basic group is its own kind; a protected chat says so; a null
	// last_message is an unknown last message.
	c, _, err = decodeChat([]byte(`{"@type":"chat","id":-4012345678,"type":{"@type":"chatTypeBasicGroup","basic_group_id":4012345678},"title":"Friends","has_protected_content":true,"last_message":null}`))
	if want := (tg.Chat{ID: -4012345678, Kind: tg.KindBasicGroup, Title: "Friends", Protected: true}); err != nil || c != want {
		t.Errorf("protected basic group: got %+v, %v; want %+v", c, err, want)
	}
}

func TestDecodeMessageCanBeSaved(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field     string
		protected bool
	}{{`,"can_be_saved":false`, true}, {`,"can_be_saved":true`, false}, {``, false}} {
		m, err := decodeMessage([]byte(`{"@type":"message","id":1048576,"chat_id":-1001987654321` + tc.field + `,"content":{"@type":"messageText"}}`))
		if err != nil || m.Protected != tc.protected {
			t.Errorf("message with %q: Protected %v, %v; want %v", tc.field, m.Protected, err, tc.protected)
		}
	}
}

func TestDecodeUser(t *testing.T) {
	t.Parallel()
	u, err := decodeUser(fixture(t, "user.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := tg.User{ID: 6012345678, Username: "stash_mirror", IsPremium: true}
	if u != want {
		t.Errorf("got %+v, want %+v", u, want)
	}
	if u.UploadLimit() != 4000<<20 {
		t.Errorf("premium upload limit %d", u.UploadLimit())
	}
}

func TestDecodeForumTopic(t *testing.T) {
	t.Parallel()
	// getForumTopic's last_message may be null (absent).
	got, err := decodeForumTopic(forum, fixture(t, "forum_topic.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := tg.Topic{ChatID: forum, ThreadID: 3145728, Name: "Sources"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// getForumTopics answers with a page of forumTopic.
func TestDecodeForumTopics(t *testing.T) {
	t.Parallel()
	got, err := decodeForumTopics(forum, fixture(t, "forum_topics.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []tg.Topic{{ChatID: forum, ThreadID: 4194304, Name: "Dragons"}, {ChatID: forum, ThreadID: 3145728, Name: "Dragons (old)"}}
	if !slices.Equal(got.Topics, want) {
		t.Errorf("got %+v, want %+v", got.Topics, want)
	}
	// The next page starts at the last topic, which has no last message:
	// its creation date and no message id.
	if next := (tg.TopicOffset{Date: time.Unix(1725000000, 0), ThreadID: 3145728}); got.TotalCount != 2 || !got.Next.Date.Equal(next.Date) || got.Next.MessageID != 0 || got.Next.ThreadID != next.ThreadID {
		t.Errorf("count %d, next offsets %+v; want 2, %+v", got.TotalCount, got.Next, next)
	}
	// The page after the last is empty, its next offsets zero.
	end, err := decodeForumTopics(forum, []byte(`{"@type":"forumTopics","total_count":2,"topics":[],"next_offset_date":0,"next_offset_message_id":0,"next_offset_message_thread_id":0}`))
	if err != nil || len(end.Topics) != 0 || !end.Next.IsZero() {
		t.Errorf("empty page: %+v, %v; want no topic and zero offsets", end, err)
	}
}

// createForumTopic answers with the new topic's forumTopicInfo.
func TestDecodeForumTopicInfo(t *testing.T) {
	t.Parallel()
	got, err := decodeForumTopicInfo(fixture(t, "forum_topic_info.json"))
	if err != nil || got != 4194304 {
		t.Errorf("got %d, %v; want thread 4194304", got, err)
	}
	if _, err := decodeForumTopicInfo([]byte(`{"@type":"forumTopic"}`)); err == nil {
		t.Error("a forumTopic decoded as a forumTopicInfo")
	}
}

func TestDecodeOptionValue(t *testing.T) {
	t.Parallel()
	got, err := decodeOptionValue(fixture(t, "option_version.json"))
	if err != nil || got != "1.8.40" {
		t.Errorf("got %q, %v", got, err)
	}
	// go-tdlib re-encodes optionValueInteger's int64 as a string too, but a
	// number must work as well.
	got, err = decodeOptionValue([]byte(`{"@type":"optionValueInteger","value":1024}`))
	if err != nil || got != "1024" {
		t.Errorf("integer as number: got %q, %v", got, err)
	}
	if _, err := decodeOptionValue([]byte(`{"@type":"optionValueBlob"}`)); err == nil {
		t.Error("unknown option value type decoded")
	}
}

func TestTDInt(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]tdInt{
		`17`:                     17,
		`"13826541201432577"`:    13826541201432577,
		`-1001987654321`:         -1001987654321,
		`null`:                   0,
		`"-9223372036854775808"`: -9223372036854775808,
	} {
		var n tdInt
		if err := n.UnmarshalJSON([]byte(in)); err != nil || n != want {
			t.Errorf("%s: got %d, %v; want %d", in, n, err, want)
		}
	}
	var n tdInt
	if err := n.UnmarshalJSON([]byte(`1.5`)); err == nil {
		t.Error("1.5 parsed as an integer")
	}
}

// A pending send can end in updateDeleteMessages for its temporary id.
func TestDecodeUpdateDeleteMessages(t *testing.T) {
	t.Parallel()
	u, ok, err := decodeUpdate(fixture(t, "update_delete_messages.json"))
	if err != nil || !ok {
		t.Fatalf("decodeUpdate: ok %v, err %v", ok, err)
	}
	want := tg.MessagesDeleted{Chat: dest, IDs: []tg.MessageID{2097152009}, IsPermanent: true}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("got %+v, want %+v", u, want)
	}
}

// A send refused with 429 is a flood wait with its duration.
func TestDecodeUpdateSendFailedFloodWait(t *testing.T) {
	t.Parallel()
	u, ok, err := decodeUpdate(fixture(t, "update_send_failed_429.json"))
	if err != nil || !ok {
		t.Fatalf("decodeUpdate: ok %v, err %v", ok, err)
	}
	f, isFailed := u.(tg.SendFailed)
	if !isFailed {
		t.Fatalf("got %T, want tg.SendFailed", u)
	}
	if d, ok := tg.FloodWait(f.Err); !ok || d != 17*time.Second || tg.Classify(f.Err) != tg.ClassFloodWait {
		t.Errorf("error %v, want a flood wait of 17s", f.Err)
	}
}

func TestDecodeUpdateSupergroupStatus(t *testing.T) {
	t.Parallel()
	lost, held := tg.ChatAccessLost{Chat: -1001987654321}, tg.ChatAccessHeld{Chat: -1001987654321}
	for _, c := range []struct {
		status string
		want   tg.Update
	}{
		{`{"@type":"chatMemberStatusLeft"}`, lost},
		{`{"@type":"chatMemberStatusBanned","banned_until_date":0}`, lost},
		{`{"@type":"chatMemberStatusRestricted","is_member":false,"restricted_until_date":0}`, lost},
		{`{"@type":"chatMemberStatusCreator","custom_title":"","is_anonymous":false,"is_member":false}`, nil},
		{`{"@type":"chatMemberStatusMember"}`, held},
		{`{"@type":"chatMemberStatusAdministrator","custom_title":"","can_be_edited":false}`, held},
		{`{"@type":"chatMemberStatusRestricted","is_member":true,"restricted_until_date":0}`, held},
		{`{"@type":"chatMemberStatusCreator","custom_title":"","is_anonymous":false,"is_member":true}`, held},
	} {
		u, ok, err := decodeUpdate([]byte(`{"@type":"updateSupergroup","supergroup":{"@type":"supergroup","id":1987654321,"status":` + c.status + `}}`))
		if err != nil || ok != (c.want != nil) || u != c.want {
			t.Errorf("%s: %#v, %v, %v; want %#v", c.status, u, ok, err, c.want)
		}
	}
	if u, ok, err := decodeUpdate(fixture(t, "update_supergroup_member.json")); err != nil || !ok || u != held {
		t.Errorf("update_supergroup_member.json: %#v, %v, %v; want %#v", u, ok, err, held)
	}
}

// A basic group upgraded to a supergroup: updateBasicGroup names the new
// supergroup (chat -1000000000000 - id), and the old chat's last message is
// messageChatUpgradeTo. The group's status then says banned, as TDLib
// shows every deactivated group's: no lost access.
func TestDecodeBasicGroupUpgrade(t *testing.T) {
	t.Parallel()
	u, ok, err := decodeUpdate(fixture(t, "update_basic_group_upgraded.json"))
	if err != nil || !ok || u != (tg.ChatUpgraded{From: -4012345678, To: -1002123456789}) {
		t.Errorf("upgraded: %#v, %v, %v; want ChatUpgraded from -4012345678 to -1002123456789", u, ok, err)
	}
	u, ok, err = decodeUpdate(fixture(t, "update_new_message_upgrade_to.json"))
	nm, is := u.(tg.NewMessage)
	if err != nil || !ok || !is || nm.Message.UpgradedTo != -1002123456789 || nm.Message.Document != nil {
		t.Errorf("messageChatUpgradeTo: %#v, %v, %v; want a message with UpgradedTo -1002123456789", u, ok, err)
	}
}

// A basic group's updateBasicGroup tells the account's status there as
// updateSupergroup does a supergroup's (a member removed is shown banned);
// a deactivated group's status is banned whoever asks, and tells nothing.
func TestDecodeBasicGroupStatus(t *testing.T) {
	t.Parallel()
	lost, held := tg.ChatAccessLost{Chat: -4012345678}, tg.ChatAccessHeld{Chat: -4012345678}
	for _, c := range []struct {
		status string
		active bool
		want   tg.Update
	}{
		{`{"@type":"chatMemberStatusLeft"}`, true, lost},
		{`{"@type":"chatMemberStatusBanned","banned_until_date":0}`, true, lost},
		{`{"@type":"chatMemberStatusCreator","custom_title":"","is_anonymous":false,"is_member":false}`, true, nil},
		{`{"@type":"chatMemberStatusMember","member_until_date":0}`, true, held},
		{`{"@type":"chatMemberStatusAdministrator","custom_title":"","can_be_edited":false}`, true, held},
		{`{"@type":"chatMemberStatusCreator","custom_title":"","is_anonymous":false,"is_member":true}`, true, held},
		{`{"@type":"chatMemberStatusBanned","banned_until_date":0}`, false, nil},
	} {
		raw := fmt.Sprintf(`{"@type":"updateBasicGroup","basic_group":{"@type":"basicGroup","id":4012345678,"member_count":0,`+
			`"status":%s,"is_active":%v,"upgraded_to_supergroup_id":0}}`, c.status, c.active)
		u, ok, err := decodeUpdate([]byte(raw))
		if err != nil || ok != (c.want != nil) || u != c.want {
			t.Errorf("%s, active %v: %#v, %v, %v; want %#v", c.status, c.active, u, ok, err, c.want)
		}
	}
	for name, want := range map[string]tg.Update{"update_basic_group.json": held, "update_basic_group_banned.json": lost} {
		if u, ok, err := decodeUpdate(fixture(t, name)); err != nil || !ok || u != want {
			t.Errorf("%s: %#v, %v, %v; want %#v", name, u, ok, err, want)
		}
	}
}
