package tdlib

import (
	"encoding/base64"
	"fmt"
	"time"

	"stashd/tg"
)

// request is one TDLib request as TDLib JSON: the method goes to "@type",
// the parameters beside it. Field names and types follow TDLib 1.8.40's
// td_api.tl (the schema go-tdlib v0.7.6 was generated from).
type request struct {
	Method string
	Params map[string]any
}

// obj is a TDLib object with only a type, such as {"@type":"chatListMain"}.
func obj(typ string) map[string]any { return map[string]any{"@type": typ} }

// loadChatsLimit is how many chats one loadChats asks for.
const loadChatsLimit = 100

// The chat lists LoadChats loads.
const (
	chatListMain    = "chatListMain"
	chatListArchive = "chatListArchive"
)

func loadChatsRequest(list string) request {
	return request{tg.MethodLoadChats, map[string]any{
		"chat_list": obj(list),
		"limit":     loadChatsLimit,
	}}
}

func getMeRequest() request { return request{tg.MethodGetMe, map[string]any{}} }

func getChatRequest(chat tg.ChatID) request {
	return request{tg.MethodGetChat, map[string]any{"chat_id": int64(chat)}}
}

func searchPublicChatRequest(username string) request {
	return request{tg.MethodSearchPublicChat, map[string]any{"username": username}}
}

func getSupergroupRequest(id int64) request {
	return request{"getSupergroup", map[string]any{"supergroup_id": id}}
}

func openChatRequest(chat tg.ChatID) request {
	return request{tg.MethodOpenChat, map[string]any{"chat_id": int64(chat)}}
}

// searchChatMessagesRequest builds searchChatMessages(chat_id, query,
// sender_id, from_message_id, offset, limit, filter, message_thread_id,
// saved_messages_topic_id). A limit above tg.MaxSearchLimit is lowered to
// it, since TDLib would answer fewer anyway.
func searchChatMessagesRequest(q tg.Search) (request, error) {
	var filter map[string]any // null: every message
	switch q.Filter {
	case tg.FilterDocument:
		filter = obj("searchMessagesFilterDocument")
	case tg.FilterNone:
	default:
		return request{}, fmt.Errorf("search chat %d: unknown filter %q", q.Chat, q.Filter)
	}
	if q.Limit <= 0 {
		return request{}, fmt.Errorf("search chat %d: limit %d is not positive", q.Chat, q.Limit)
	}
	return request{tg.MethodSearchChatMessages, map[string]any{
		"chat_id":                 int64(q.Chat),
		"query":                   q.Query,
		"sender_id":               nil,
		"from_message_id":         int64(q.FromMessageID),
		"offset":                  q.Offset,
		"limit":                   min(q.Limit, tg.MaxSearchLimit),
		"filter":                  filter,
		"message_thread_id":       q.ThreadID,
		"saved_messages_topic_id": 0,
	}}, nil
}

// getChatHistoryRequest builds getChatHistory(chat_id, from_message_id,
// offset 0, limit, only_local false); a limit above tg.MaxSearchLimit is
// lowered to it, as TDLib would.
func getChatHistoryRequest(chat tg.ChatID, from tg.MessageID, limit int) request {
	return request{tg.MethodGetChatHistory, map[string]any{
		"chat_id":         int64(chat),
		"from_message_id": int64(from),
		"offset":          0,
		"limit":           min(limit, tg.MaxSearchLimit),
		"only_local":      false,
	}}
}

func getMessageRequest(chat tg.ChatID, id tg.MessageID) request {
	return request{tg.MethodGetMessage, map[string]any{"chat_id": int64(chat), "message_id": int64(id)}}
}

func getChatMessageByDateRequest(chat tg.ChatID, date time.Time) request {
	return request{tg.MethodGetChatMessageByDate, map[string]any{"chat_id": int64(chat), "date": date.Unix()}}
}

func getForumTopicRequest(chat tg.ChatID, threadID int64) request {
	return request{tg.MethodGetForumTopic, map[string]any{"chat_id": int64(chat), "message_thread_id": threadID}}
}

// downloadPriority is TDLib's download priority (1..32) for stashd's
// downloads. They all matter equally.
const downloadPriority = 1

// downloadFileRequest asks for the whole file, asynchronously: a
// synchronous download would be answered only when complete, after
// go-tdlib's 60-second response timeout for any large file. Progress comes
// as updateFile.
func downloadFileRequest(file int32) request {
	return request{tg.MethodDownloadFile, map[string]any{
		"file_id":     file,
		"priority":    downloadPriority,
		"offset":      0,
		"limit":       0,
		"synchronous": false,
	}}
}

// cancelDownloadFileRequest stops a download whether or not TDLib has
// started fetching (only_if_pending false): stashd gives up on it.
func cancelDownloadFileRequest(file int32) request {
	return request{tg.MethodCancelDownloadFile, map[string]any{"file_id": file, "only_if_pending": false}}
}

// deleteFileRequest deletes a file's local copy.
func deleteFileRequest(file int32) request {
	return request{tg.MethodDeleteFile, map[string]any{"file_id": file}}
}

// sendDocumentRequest sends a file already on Telegram, by its remote id
// (inputFileRemote: no upload), with caption as plain text, into forum
// topic thread of chat (0: no topic; in a forum, its General topic). The
// default options are null; a silent send sets messageSendOptions'
// disable_notification.
func sendDocumentRequest(chat tg.ChatID, thread int64, remoteFileID, caption string, opts tg.SendOptions) request {
	return request{tg.MethodSendMessage, map[string]any{
		"chat_id":               int64(chat),
		"message_thread_id":     thread,
		"reply_to":              nil,
		"options":               sendOptions(opts),
		"reply_markup":          nil,
		"input_message_content": inputDocument(remoteFileID, caption),
	}}
}

// sendAlbumRequest is sendMessageAlbum of documents already on Telegram.
func sendAlbumRequest(chat tg.ChatID, thread int64, items []tg.AlbumItem, opts tg.SendOptions) request {
	contents := make([]any, len(items))
	for i, it := range items {
		contents[i] = inputDocument(it.RemoteFileID, it.Caption)
	}
	return request{tg.MethodSendMessageAlbum, map[string]any{
		"chat_id":                int64(chat),
		"message_thread_id":      thread,
		"reply_to":               nil,
		"options":                sendOptions(opts),
		"input_message_contents": contents,
	}}
}

// sendOptions is messageSendOptions for opts; null (TDLib's defaults) for
// the zero value.
func sendOptions(opts tg.SendOptions) any {
	if opts == (tg.SendOptions{}) {
		return nil
	}
	return map[string]any{
		"@type":                                  "messageSendOptions",
		"disable_notification":                   opts.Silent,
		"from_background":                        false,
		"protect_content":                        false,
		"update_order_of_installed_sticker_sets": false,
		"scheduling_state":                       nil,
		"effect_id":                              "0",
		"sending_id":                             0,
		"only_preview":                           false,
	}
}

// inputDocument is inputMessageDocument of a file already on Telegram.
func inputDocument(remoteFileID, caption string) map[string]any {
	return map[string]any{
		"@type":     "inputMessageDocument",
		"document":  map[string]any{"@type": "inputFileRemote", "id": remoteFileID},
		"thumbnail": nil,
		// Keep an archive a document whatever its name or MIME type.
		"disable_content_type_detection": true,
		"caption": map[string]any{
			"@type":    "formattedText",
			"text":     caption,
			"entities": []any{},
		},
	}
}

// forumTopicIconColor is the icon color of the topics stashd creates: the
// first of the six colors createForumTopic accepts (0x6FB9F0).
const forumTopicIconColor = 0x6FB9F0

func createForumTopicRequest(chat tg.ChatID, name string) request {
	return request{tg.MethodCreateForumTopic, map[string]any{
		"chat_id": int64(chat),
		"name":    name,
		"icon":    map[string]any{"@type": "forumTopicIcon", "color": forumTopicIconColor, "custom_emoji_id": "0"},
	}}
}

// getForumTopicsRequest asks for a page of chat's topics whose names match
// query, the most recently active first, starting after offset (zero: the
// first page); a limit above tg.MaxSearchLimit is lowered to it.
func getForumTopicsRequest(chat tg.ChatID, query string, offset tg.TopicOffset, limit int) request {
	var date int64
	if !offset.Date.IsZero() {
		date = offset.Date.Unix()
	}
	return request{tg.MethodGetForumTopics, map[string]any{
		"chat_id":                  int64(chat),
		"query":                    query,
		"offset_date":              date,
		"offset_message_id":        int64(offset.MessageID),
		"offset_message_thread_id": offset.ThreadID,
		"limit":                    min(limit, tg.MaxSearchLimit),
	}}
}

// toggleForumTopicIsClosedRequest closes or reopens a forum topic.
func toggleForumTopicIsClosedRequest(chat tg.ChatID, thread int64, closed bool) request {
	return request{tg.MethodToggleForumTopicIsClosed, map[string]any{
		"chat_id":           int64(chat),
		"message_thread_id": thread,
		"is_closed":         closed,
	}}
}

// deleteMessagesRequest deletes ids of chat; revoke deletes them for every
// member (channels and supergroups ignore it: a deletion there is always
// for everyone).
func deleteMessagesRequest(chat tg.ChatID, ids []tg.MessageID, revoke bool) request {
	raw := make([]int64, len(ids))
	for i, id := range ids {
		raw[i] = int64(id)
	}
	return request{tg.MethodDeleteMessages, map[string]any{
		"chat_id":     int64(chat),
		"message_ids": raw,
		"revoke":      revoke,
	}}
}

func getOptionRequest(name string) request {
	return request{"getOption", map[string]any{"name": name}}
}

func setLogVerbosityLevelRequest(level int) request {
	return request{"setLogVerbosityLevel", map[string]any{"new_verbosity_level": level}}
}

// tdlibLogMaxSize is where TDLib rotates its log file.
const tdlibLogMaxSize = 10 << 20

// setLogStreamRequest sends TDLib's log to path, or to stderr when path is
// empty.
func setLogStreamRequest(path string) request {
	stream := obj("logStreamDefault")
	if path != "" {
		stream = map[string]any{
			"@type":           "logStreamFile",
			"path":            path,
			"max_file_size":   tdlibLogMaxSize,
			"redirect_stderr": false,
		}
	}
	return request{"setLogStream", map[string]any{"log_stream": stream}}
}

// setTdlibParametersRequest starts the TDLib instance of cfg. The message
// database is on because searchChatMessages needs it; the chat and file
// databases keep chats and downloaded files across restarts.
func setTdlibParametersRequest(cfg Config) request {
	var key string
	if len(cfg.DatabaseEncryptionKey) > 0 {
		key = base64.StdEncoding.EncodeToString(cfg.DatabaseEncryptionKey) // TDLib's bytes are base64
	}
	return request{"setTdlibParameters", map[string]any{
		"use_test_dc":             cfg.UseTestDC,
		"database_directory":      cfg.DatabaseDir(),
		"files_directory":         cfg.FilesDir(),
		"database_encryption_key": key,
		"use_file_database":       true,
		"use_chat_info_database":  true,
		"use_message_database":    true,
		"use_secret_chats":        false,
		"api_id":                  cfg.APIID,
		"api_hash":                cfg.APIHash,
		"system_language_code":    cfg.SystemLanguageCode,
		"device_model":            cfg.DeviceModel,
		"system_version":          cfg.SystemVersion,
		"application_version":     cfg.ApplicationVersion,
	}}
}

// authAnswerRequest sends a person's answer to state: the phone number, the
// login code or the password.
func authAnswerRequest(state, answer string) (request, error) {
	switch state {
	case StateWaitPhoneNumber:
		return request{"setAuthenticationPhoneNumber", map[string]any{"phone_number": answer, "settings": nil}}, nil
	case StateWaitCode:
		return request{"checkAuthenticationCode", map[string]any{"code": answer}}, nil
	case StateWaitPassword:
		return request{"checkAuthenticationPassword", map[string]any{"password": answer}}, nil
	}
	return request{}, fmt.Errorf("no answer is sent in %s", state)
}

// requestQrCodeAuthenticationRequest asks for a QR-code login
// (requestQrCodeAuthentication other_user_ids:vector<int53>).
func requestQrCodeAuthenticationRequest() request {
	return request{"requestQrCodeAuthentication", map[string]any{"other_user_ids": []int64{}}}
}

// addProxyRequest builds addProxy(server, port, enable, type) enabling p.
func addProxyRequest(p tg.Proxy) request {
	var typ map[string]any
	switch p.Type {
	case tg.ProxySOCKS5:
		typ = map[string]any{"@type": "proxyTypeSocks5", "username": p.Username, "password": p.Password}
	case tg.ProxyHTTP:
		typ = map[string]any{"@type": "proxyTypeHttp", "username": p.Username, "password": p.Password, "http_only": false}
	default:
		typ = map[string]any{"@type": "proxyTypeMtproto", "secret": p.Secret}
	}
	return request{"addProxy", map[string]any{"server": p.Server, "port": p.Port, "enable": true, "type": typ}}
}
