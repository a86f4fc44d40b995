package tdlib

import (
	"encoding/json"
	"testing"
	"time"

	"stashd/tg"
)

// asJSON renders a request as TDLib receives it (go-tdlib adds "@type" and
// "@extra" to the parameters), and fails the test unless it is a request
// of TDLib's schema.
func asJSON(t *testing.T, r request) string {
	t.Helper()
	m := map[string]any{"@type": r.Method}
	for k, v := range r.Params {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := tdSchema(t).CheckRequest(b); err != nil {
		t.Errorf("TDLib schema: %s: %v", b, err)
	}
	return string(b)
}

func TestRequests(t *testing.T) {
	t.Parallel()
	search, err := searchChatMessagesRequest(tg.Search{
		Chat:          forum,
		FromMessageID: tg.MessageIDFromServer(40),
		Offset:        -99,
		Limit:         250,
		Filter:        tg.FilterDocument,
	})
	if err != nil {
		t.Fatal(err)
	}
	all, err := searchChatMessagesRequest(tg.Search{Chat: channel, Limit: 10, ThreadID: 3145728})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  request
		want string
	}{
		{"loadChats", loadChatsRequest(chatListMain),
			`{"@type":"loadChats","chat_list":{"@type":"chatListMain"},"limit":100}`},
		{"loadChats archive", loadChatsRequest(chatListArchive),
			`{"@type":"loadChats","chat_list":{"@type":"chatListArchive"},"limit":100}`},
		{"getChat", getChatRequest(channel),
			`{"@type":"getChat","chat_id":-1001987654321}`},
		{"searchPublicChat", searchPublicChatRequest("stashd_news"),
			`{"@type":"searchPublicChat","username":"stashd_news"}`},
		{"searchChatMessages documents", search,
			`{"@type":"searchChatMessages","chat_id":-1002123456789,"filter":{"@type":"searchMessagesFilterDocument"},"from_message_id":41943040,"limit":100,"message_thread_id":0,"offset":-99,"query":"","saved_messages_topic_id":0,"sender_id":null}`},
		{"searchChatMessages all in a topic", all,
			`{"@type":"searchChatMessages","chat_id":-1001987654321,"filter":null,"from_message_id":0,"limit":10,"message_thread_id":3145728,"offset":0,"query":"","saved_messages_topic_id":0,"sender_id":null}`},
		{"getMessage", getMessageRequest(channel, tg.MessageIDFromServer(1101)),
			`{"@type":"getMessage","chat_id":-1001987654321,"message_id":1154482176}`},
		{"getChatHistory", getChatHistoryRequest(dest, tg.MessageIDFromServer(7), 250),
			`{"@type":"getChatHistory","chat_id":-1001555000111,"from_message_id":7340032,"limit":100,"offset":0,"only_local":false}`},
		{"getChatMessageByDate", getChatMessageByDateRequest(channel, time.Date(2024, 11, 15, 16, 0, 0, 0, time.UTC)),
			`{"@type":"getChatMessageByDate","chat_id":-1001987654321,"date":1731686400}`},
		{"getForumTopic", getForumTopicRequest(forum, 3145728),
			`{"@type":"getForumTopic","chat_id":-1002123456789,"message_thread_id":3145728}`},
		{"downloadFile", downloadFileRequest(512),
			`{"@type":"downloadFile","file_id":512,"limit":0,"offset":0,"priority":1,"synchronous":false}`},
		{"cancelDownloadFile", cancelDownloadFileRequest(512),
			`{"@type":"cancelDownloadFile","file_id":512,"only_if_pending":false}`},
		{"deleteFile", deleteFileRequest(512),
			`{"@type":"deleteFile","file_id":512}`},
		{"sendMessage", sendDocumentRequest(dest, 0, "BQACAgQ", "a.zip\nstashd:6f1c", tg.SendOptions{}),
			`{"@type":"sendMessage","chat_id":-1001555000111,"input_message_content":{"@type":"inputMessageDocument","caption":{"@type":"formattedText","entities":[],"text":"a.zip\nstashd:6f1c"},"disable_content_type_detection":true,"document":{"@type":"inputFileRemote","id":"BQACAgQ"},"thumbnail":null},"message_thread_id":0,"options":null,"reply_markup":null,"reply_to":null}`},
		{"sendMessage into a topic", sendDocumentRequest(forum, 3145728, "BQACAgQ", "a.zip\nstashd:6f1c", tg.SendOptions{}),
			`{"@type":"sendMessage","chat_id":-1002123456789,"input_message_content":{"@type":"inputMessageDocument","caption":{"@type":"formattedText","entities":[],"text":"a.zip\nstashd:6f1c"},"disable_content_type_detection":true,"document":{"@type":"inputFileRemote","id":"BQACAgQ"},"thumbnail":null},"message_thread_id":3145728,"options":null,"reply_markup":null,"reply_to":null}`},
		{"sendMessage silent", sendDocumentRequest(dest, 0, "BQACAgQ", "a.zip\nstashd:6f1c", tg.SendOptions{Silent: true}),
			`{"@type":"sendMessage","chat_id":-1001555000111,"input_message_content":{"@type":"inputMessageDocument","caption":{"@type":"formattedText","entities":[],"text":"a.zip\nstashd:6f1c"},"disable_content_type_detection":true,"document":{"@type":"inputFileRemote","id":"BQACAgQ"},"thumbnail":null},"message_thread_id":0,"options":{"@type":"messageSendOptions","disable_notification":true,"effect_id":"0","from_background":false,"only_preview":false,"protect_content":false,"scheduling_state":null,"sending_id":0,"update_order_of_installed_sticker_sets":false},"reply_markup":null,"reply_to":null}`},
		{"sendMessageAlbum", sendAlbumRequest(forum, 3145728, []tg.AlbumItem{{RemoteFileID: "BQA1", Caption: "a.part1.rar\nstashd:1"}, {RemoteFileID: "BQA2", Caption: "a.part2.rar\nstashd:2"}}, tg.SendOptions{}),
			`{"@type":"sendMessageAlbum","chat_id":-1002123456789,"input_message_contents":[{"@type":"inputMessageDocument","caption":{"@type":"formattedText","entities":[],"text":"a.part1.rar\nstashd:1"},"disable_content_type_detection":true,"document":{"@type":"inputFileRemote","id":"BQA1"},"thumbnail":null},{"@type":"inputMessageDocument","caption":{"@type":"formattedText","entities":[],"text":"a.part2.rar\nstashd:2"},"disable_content_type_detection":true,"document":{"@type":"inputFileRemote","id":"BQA2"},"thumbnail":null}],"message_thread_id":3145728,"options":null,"reply_to":null}`},
		{"createForumTopic", createForumTopicRequest(forum, "Dragons"),
			`{"@type":"createForumTopic","chat_id":-1002123456789,"icon":{"@type":"forumTopicIcon","color":7322096,"custom_emoji_id":"0"},"name":"Dragons"}`},
		{"getForumTopics", getForumTopicsRequest(forum, "Dragons", tg.TopicOffset{}, tg.MaxSearchLimit),
			`{"@type":"getForumTopics","chat_id":-1002123456789,"limit":100,"offset_date":0,"offset_message_id":0,"offset_message_thread_id":0,"query":"Dragons"}`},
		{"getForumTopics next page", getForumTopicsRequest(forum, "Dragons", tg.TopicOffset{Date: time.Unix(1725000000, 0), MessageID: 48234496, ThreadID: 3145728}, 250),
			`{"@type":"getForumTopics","chat_id":-1002123456789,"limit":100,"offset_date":1725000000,"offset_message_id":48234496,"offset_message_thread_id":3145728,"query":"Dragons"}`},
		{"deleteMessages", deleteMessagesRequest(dest, []tg.MessageID{tg.MessageIDFromServer(7), tg.MessageIDFromServer(9)}, true),
			`{"@type":"deleteMessages","chat_id":-1001555000111,"message_ids":[7340032,9437184],"revoke":true}`},
		{"getOption", getOptionRequest("version"),
			`{"@type":"getOption","name":"version"}`},
		{"setLogStream stderr", setLogStreamRequest(""),
			`{"@type":"setLogStream","log_stream":{"@type":"logStreamDefault"}}`},
		{"setLogStream file", setLogStreamRequest("/var/log/stashd/tdlib.log"),
			`{"@type":"setLogStream","log_stream":{"@type":"logStreamFile","max_file_size":10485760,"path":"/var/log/stashd/tdlib.log","redirect_stderr":false}}`},
	}
	for _, tt := range tests {
		if got := asJSON(t, tt.req); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

func TestSearchRequestRejects(t *testing.T) {
	t.Parallel()
	if _, err := searchChatMessagesRequest(tg.Search{Chat: channel, Limit: 10, Filter: "photo"}); err == nil {
		t.Error("unknown filter accepted")
	}
	if _, err := searchChatMessagesRequest(tg.Search{Chat: channel}); err == nil {
		t.Error("zero limit accepted")
	}
}

func TestSetTdlibParametersRequest(t *testing.T) {
	t.Parallel()
	cfg := Config{
		Account: "main", StateDir: "/var/lib/stashd/accounts/main", APIID: 94575, APIHash: "a3406de8d171bb422bb6ddf3bbd800e2",
		DatabaseEncryptionKey: []byte("k3y"),
	}.withDefaults()
	var got map[string]any
	if err := json.Unmarshal([]byte(asJSON(t, setTdlibParametersRequest(cfg))), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"@type":                   "setTdlibParameters",
		"database_directory":      "/var/lib/stashd/accounts/main/database",
		"files_directory":         "/var/lib/stashd/accounts/main/files",
		"database_encryption_key": "azN5",
		// searchChatMessages needs the message database.
		"use_message_database":   true,
		"use_chat_info_database": true,
		"use_file_database":      true,
		"use_secret_chats":       false,
		"use_test_dc":            false,
		"api_id":                 float64(94575),
		"api_hash":               "a3406de8d171bb422bb6ddf3bbd800e2",
		"system_language_code":   "en",
		"device_model":           "stashd",
		"application_version":    "dev",
		"system_version":         cfg.SystemVersion,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d parameters, want %d: %v", len(got), len(want), got)
	}
}

func TestAuthAnswerRequest(t *testing.T) {
	t.Parallel()
	for state, want := range map[string]string{
		StateWaitPhoneNumber: `{"@type":"setAuthenticationPhoneNumber","phone_number":"x","settings":null}`,
		StateWaitCode:        `{"@type":"checkAuthenticationCode","code":"x"}`,
		StateWaitPassword:    `{"@type":"checkAuthenticationPassword","password":"x"}`,
	} {
		r, err := authAnswerRequest(state, "x")
		if err != nil {
			t.Fatal(err)
		}
		if got := asJSON(t, r); got != want {
			t.Errorf("%s: got %s, want %s", state, got, want)
		}
	}
	if _, err := authAnswerRequest(StateWaitRegistration, "x"); err == nil {
		t.Error("an answer to authorizationStateWaitRegistration was accepted")
	}
}
