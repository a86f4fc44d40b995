package tdschema_test

import (
	"strings"
	"sync"
	"testing"

	"stashd/internal/tdschema"
)

var (
	loadOnce sync.Once
	schema   *tdschema.Schema
	loadErr  error
)

func load(t *testing.T) *tdschema.Schema {
	t.Helper()
	loadOnce.Do(func() { schema, loadErr = tdschema.Load() })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return schema
}

// A chat as TDLib 1.8.40 writes it (chatTypeSupergroup, no photo, no last
// message), the members the schema says may be null left out.
const chat = `{"@type":"chat","id":-1001,"type":{"@type":"chatTypeSupergroup","supergroup_id":1,"is_channel":true},` +
	`"title":"t","accent_color_id":0,"background_custom_emoji_id":"0","profile_accent_color_id":-1,"profile_background_custom_emoji_id":"0",` +
	`"permissions":{"@type":"chatPermissions","can_send_basic_messages":true,"can_send_audios":true,"can_send_documents":true,"can_send_photos":true,` +
	`"can_send_videos":true,"can_send_video_notes":true,"can_send_voice_notes":true,"can_send_polls":true,"can_send_other_messages":true,` +
	`"can_add_link_previews":true,"can_change_info":false,"can_invite_users":false,"can_pin_messages":false,"can_create_topics":false},` +
	`"positions":[],"chat_lists":[],"has_protected_content":false,"is_translatable":false,"is_marked_as_unread":false,"view_as_topics":false,` +
	`"has_scheduled_messages":false,"can_be_deleted_only_for_self":false,"can_be_deleted_for_all_users":false,"can_be_reported":true,` +
	`"default_disable_notification":false,"unread_count":0,"last_read_inbox_message_id":0,"last_read_outbox_message_id":0,` +
	`"unread_mention_count":0,"unread_reaction_count":0,` +
	`"notification_settings":{"@type":"chatNotificationSettings","use_default_mute_for":true,"mute_for":0,"use_default_sound":true,"sound_id":"0",` +
	`"use_default_show_preview":true,"show_preview":false,"use_default_mute_stories":true,"mute_stories":false,"use_default_story_sound":true,` +
	`"story_sound_id":"0","use_default_show_story_sender":true,"show_story_sender":false,"use_default_disable_pinned_message_notifications":true,` +
	`"disable_pinned_message_notifications":false,"use_default_disable_mention_notifications":true,"disable_mention_notifications":false},` +
	`"available_reactions":{"@type":"chatAvailableReactionsSome","reactions":[],"max_reaction_count":11},` +
	`"message_auto_delete_time":0,"theme_name":"","video_chat":{"@type":"videoChat","group_call_id":0,"has_participants":false},"reply_markup_message_id":0,"client_data":"","@client_id":1,"@extra":"x"}`

func TestCheckObjectAcceptsTDLibOutput(t *testing.T) {
	t.Parallel()
	s := load(t)
	for _, line := range []string{
		chat,
		`{"@type":"updateOption","name":"version","value":{"@type":"optionValueString","value":"1.8.40"},"@client_id":1}`,
		`{"@type":"updateOption","name":"unix_time","value":{"@type":"optionValueInteger","value":"1795428547"},"@client_id":1}`,
		`{"@type":"updateAuthorizationState","authorization_state":{"@type":"authorizationStateClosed"},"@client_id":1}`,
		`{"@type":"ok","@extra":"c","@client_id":1}`,
		`{"@type":"error","code":429,"message":"Too Many Requests: retry after 7"}`,
	} {
		if err := s.CheckObject([]byte(line)); err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
}

// Every rule of TDLib's JSON encoding is checked: one object per rule
// broken, the error naming the member.
func TestCheckObjectFindsViolations(t *testing.T) {
	t.Parallel()
	s := load(t)
	for _, tc := range []struct{ name, line, want string }{
		{"unknown constructor", `{"@type":"updateNothing"}`, "no such constructor"},
		{"function as object", `{"@type":"getChat","chat_id":1}`, "no such constructor"},
		{"undeclared field", `{"@type":"ok","extra_field":1}`, "ok.extra_field: not a field"},
		{"int64 as number", strings.Replace(chat, `"background_custom_emoji_id":"0"`, `"background_custom_emoji_id":0`, 1), "background_custom_emoji_id: number 0, want int64 as a string"},
		{"int53 as string", strings.Replace(chat, `"id":-1001`, `"id":"-1001"`, 1), "chat.id: \"-1001\", want int53 as a number"},
		{"int32 out of range", `{"@type":"error","code":4294967296,"message":""}`, "is not an int32"},
		{"int32 not integral", `{"@type":"error","code":1.5,"message":""}`, "is not an int32"},
		{"Bool as number", strings.Replace(chat, `"is_translatable":false`, `"is_translatable":0`, 1), "is_translatable: number 0, want true or false"},
		{"string as number", `{"@type":"error","code":1,"message":5}`, "want a string"},
		{"option integer as number", `{"@type":"updateOption","name":"x","value":{"@type":"optionValueInteger","value":7}}`, "want int64 as a string"},
		{"double as string", `{"@type":"messageSendingStateFailed","error":{"@type":"error","code":1,"message":""},"can_retry":false,` +
			`"need_another_sender":false,"need_another_reply_quote":false,"need_drop_reply":false,"retry_after":"0"}`, "retry_after: \"0\", want a number"},
		{"vector not array", strings.Replace(chat, `"positions":[]`, `"positions":{}`, 1), "positions: an object, want an array of chatPosition"},
		{"vector element", strings.Replace(chat, `"chat_lists":[]`, `"chat_lists":[{"@type":"chatTypePrivate","user_id":1}]`, 1), "chat_lists[0]: chatTypePrivate is a ChatType, want a ChatList"},
		{"nested wrong class", strings.Replace(chat, `{"@type":"chatTypeSupergroup","supergroup_id":1,"is_channel":true}`, `{"@type":"chatListMain"}`, 1), "chat.type: chatListMain is a ChatList, want a ChatType"},
		{"nested without type", strings.Replace(chat, `{"@type":"chatTypeSupergroup","supergroup_id":1,"is_channel":true}`, `{"supergroup_id":1,"is_channel":true}`, 1), "chat.type: object without @type"},
		{"nested missing field", strings.Replace(chat, `"supergroup_id":1,`, ``, 1), "type(chatTypeSupergroup).supergroup_id: missing"},
		{"missing field", strings.Replace(chat, `"can_be_reported":true,`, ``, 1), "chat.can_be_reported: missing"},
		{"null where not nullable", strings.Replace(chat, `"title":"t"`, `"title":null`, 1), "chat.title: null"},
		{"missing required object", strings.Replace(chat, `"available_reactions":{"@type":"chatAvailableReactionsSome","reactions":[],"max_reaction_count":11},`, ``, 1), "chat.available_reactions: missing"},
		{"bad client id", `{"@type":"ok","@client_id":"1"}`, "@client_id"},
		{"not an object", `[1]`, "want an object"},
	} {
		if err := s.CheckObject([]byte(tc.line)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	// A member that may be null is left out when null: TDLib never writes
	// null (chat above has neither photo nor last_message).
	withNull := strings.Replace(chat, `"positions"`, `"last_message":null,"positions"`, 1)
	if err := s.CheckObject([]byte(withNull)); err == nil || !strings.Contains(err.Error(), "chat.last_message: null: TDLib leaves out") {
		t.Errorf("null last_message: %v", err)
	}
	// bytes: base64.
	if err := s.CheckRequest([]byte(`{"@type":"setDatabaseEncryptionKey","new_encryption_key":"!!"}`)); err == nil || !strings.Contains(err.Error(), "not base64") {
		t.Errorf("bytes not base64: %v", err)
	}
	if err := s.CheckRequest([]byte(`{"@type":"setDatabaseEncryptionKey","new_encryption_key":"AAE="}`)); err != nil {
		t.Errorf("bytes as base64: %v", err)
	}
}

func TestCheckRequest(t *testing.T) {
	t.Parallel()
	s := load(t)
	for _, line := range []string{
		// As go-tdlib writes it: every parameter, nulls where "pass null".
		`{"@type":"searchChatMessages","chat_id":-1001,"query":"","sender_id":null,"from_message_id":0,"offset":0,"limit":100,` +
			`"filter":{"@type":"searchMessagesFilterDocument"},"message_thread_id":0,"saved_messages_topic_id":0,"@extra":"1","@client_id":1}`,
		// Missing parameters are TDLib's defaults.
		`{"@type":"searchChatMessages","chat_id":-1001,"limit":100}`,
		`{"@type":"loadChats","chat_list":null,"limit":100}`,
		`{"@type":"close"}`,
		`{"@type":"searchPublicChat","username":"stashd_news"}`,
	} {
		if err := s.CheckRequest([]byte(line)); err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
	for _, tc := range []struct{ line, want string }{
		{`{"@type":"chat","id":1}`, "no such function"},
		{`{"@type":"getChat","chat_id":"1"}`, "want int53 as a number"},
		{`{"@type":"getChat","chatid":1}`, "not a field of getChat"},
		{`{"@type":"searchPublicChat","username":null}`, "null"},
		{`{"@type":"loadChats","chat_list":{"@type":"chatTypePrivate","user_id":1}}`, "want a ChatList"},
	} {
		if err := s.CheckRequest([]byte(tc.line)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.line, err, tc.want)
		}
	}
}

func TestCheckAnswer(t *testing.T) {
	t.Parallel()
	s := load(t)
	if err := s.CheckAnswer("getChat", []byte(chat)); err != nil {
		t.Errorf("chat for getChat: %v", err)
	}
	if err := s.CheckAnswer("getOption", []byte(`{"@type":"optionValueString","value":"1.8.40"}`)); err != nil {
		t.Errorf("option value for getOption: %v", err)
	}
	if err := s.CheckAnswer("getChat", []byte(`{"@type":"error","code":400,"message":"Chat not found"}`)); err != nil {
		t.Errorf("error for getChat: %v", err)
	}
	if err := s.CheckAnswer("getChat", []byte(`{"@type":"ok"}`)); err == nil || !strings.Contains(err.Error(), "returns Chat") {
		t.Errorf("ok for getChat: %v", err)
	}
}
