package tdjsonsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"stashd/tg"
)

// This file writes the port's values as TDLib 1.8.40's JSON: the field
// names and types of td_api.tl, int64 fields as strings (media_album_id,
// option integers), int53 and int32 fields as numbers, "@type" first.

// object is a TDLib object. Its members keep the order they were added in,
// as TDLib writes them, so the wire reads like TDLib's.
type object []member

// member is one key and value of an object.
type member struct {
	key string
	val any
}

// MarshalJSON implements json.Marshaler.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.val)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", m.key, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// typed returns an object of type typ with no other members.
func typed(typ string) object { return object{{"@type", typ}} }

// int64String is how TDLib writes an int64 field.
func int64String(n int64) string { return strconv.FormatInt(n, 10) }

// okObject is TDLib's "ok".
func okObject() object { return typed("ok") }

// errorObject is TDLib's error object.
func errorObject(code int, message string) object {
	return object{{"@type", "error"}, {"code", code}, {"message", message}}
}

// Messages TDLib uses for errors the simulator has no *tg.Error for.
const (
	msgRequestAborted = "Request aborted"
	msgChatNotFound   = "Chat not found"
	msgNoAccess       = "Can't access the chat"
	msgNotFound       = "Not Found"
	msgUnauthorized   = "Unauthorized"
)

// errorFor writes err as TDLib would: the code and message of the
// *tg.Error in its chain; a flood wait without one as 429 "Too Many
// Requests: retry after N"; the port's sentinels as their TDLib errors; a
// request cut short by close as 500 "Request aborted"; anything else as 500
// with its text.
func errorFor(err error) object {
	var te *tg.Error
	if errors.As(err, &te) {
		return errorObject(te.Code, te.Message)
	}
	if d, ok := tg.FloodWait(err); ok {
		secs := int64((d + time.Second - 1) / time.Second)
		return errorObject(429, fmt.Sprintf("Too Many Requests: retry after %d", secs))
	}
	switch {
	case errors.Is(err, tg.ErrNoAccess):
		return errorObject(400, msgNoAccess)
	case errors.Is(err, tg.ErrChatNotFound):
		return errorObject(400, msgChatNotFound)
	case errors.Is(err, tg.ErrMessageNotFound):
		return errorObject(404, msgNotFound)
	case errors.Is(err, tg.ErrClosed), errors.Is(err, errAborted):
		return errorObject(500, msgRequestAborted)
	}
	return errorObject(500, err.Error())
}

// errAborted is the cause of a request cut short because its session is
// closing.
var errAborted = errors.New("request aborted: the TDLib instance is closing")

// tdError is an error the session answers with a TDLib code and message of
// its own (bad parameters, methods the simulator does not serve).
func tdError(code int, format string, args ...any) error {
	return &tg.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// formattedText is TDLib's formattedText without entities.
func formattedText(text string) object {
	return object{{"@type", "formattedText"}, {"text", text}, {"entities", []any{}}}
}

// fileObject is TDLib's file.
func fileObject(f tg.File) object {
	return object{
		{"@type", "file"},
		{"id", f.ID},
		{"size", f.Size},
		{"expected_size", f.Size},
		{"local", object{
			{"@type", "localFile"},
			{"path", f.LocalPath},
			{"can_be_downloaded", true},
			{"can_be_deleted", f.DownloadDone},
			{"is_downloading_active", f.DownloadActive},
			{"is_downloading_completed", f.DownloadDone},
			{"download_offset", 0},
			{"downloaded_prefix_size", f.Downloaded},
			{"downloaded_size", f.Downloaded},
		}},
		{"remote", object{
			{"@type", "remoteFile"},
			{"id", f.RemoteID},
			{"unique_id", f.UniqueID},
			{"is_uploading_active", false},
			{"is_uploading_completed", true},
			{"uploaded_size", f.Size},
		}},
	}
}

// messageContent is a document message, a basic group's upgrade
// (messageChatUpgradeTo), or a text message carrying the caption for
// anything else (the port keeps no other content).
func messageContent(m tg.Message) object {
	if m.UpgradedTo != 0 {
		return object{{"@type", "messageChatUpgradeTo"}, {"supergroup_id", supergroupID(m.UpgradedTo)}}
	}
	if m.Document == nil {
		return object{{"@type", "messageText"}, {"text", formattedText(m.Caption)}}
	}
	return object{
		{"@type", "messageDocument"},
		{"document", object{
			{"@type", "document"},
			{"file_name", m.Document.FileName},
			{"mime_type", m.Document.MimeType},
			{"document", fileObject(m.Document.File)},
		}},
		{"caption", formattedText(m.Caption)},
	}
}

// messageOptions are what a message view needs beyond tg.Message.
type messageOptions struct {
	// outgoing marks a message this account sent.
	outgoing bool
	// sendingState is the message's sending_state; nil for a message on the
	// server.
	sendingState object
}

// messageObject is TDLib's message. The simulator does not say who sent a
// message: the sender is written as the chat itself (an anonymous channel
// or group admin), which is what stashd's sources mostly are.
func messageObject(m tg.Message, o messageOptions) object {
	out := object{
		{"@type", "message"},
		{"id", int64(m.ID)},
		{"sender_id", object{{"@type", "messageSenderChat"}, {"chat_id", int64(m.ChatID)}}},
		{"chat_id", int64(m.ChatID)},
	}
	if o.sendingState != nil {
		out = append(out, member{"sending_state", o.sendingState})
	}
	var date, edited int64
	if !m.Date.IsZero() {
		date = m.Date.Unix()
	}
	if !m.EditDate.IsZero() {
		edited = m.EditDate.Unix()
	}
	return append(out,
		member{"is_outgoing", o.outgoing},
		member{"is_pinned", false},
		member{"is_from_offline", false},
		member{"can_be_saved", !m.Protected},
		member{"has_timestamped_media", true},
		member{"is_channel_post", false},
		member{"is_topic_message", m.IsTopicMessage},
		member{"contains_unread_mention", false},
		member{"date", date},
		member{"edit_date", edited},
		member{"unread_reactions", []any{}},
		member{"message_thread_id", m.ThreadID},
		member{"saved_messages_topic_id", 0},
		member{"self_destruct_in", 0.0},
		member{"auto_delete_in", 0.0},
		member{"via_bot_user_id", 0},
		member{"sender_business_bot_user_id", 0},
		member{"sender_boost_count", 0},
		member{"author_signature", ""},
		member{"media_album_id", int64String(m.AlbumID)},
		member{"effect_id", "0"},
		member{"has_sensitive_content", false},
		member{"restriction_reason", ""},
		member{"content", messageContent(m)},
	)
}

// withLastMessage adds the last_message of a chat or topic, of which the
// simulator reports only the id. TDLib leaves out null members, so there is
// none when id is 0.
func withLastMessage(o object, chat tg.ChatID, id tg.MessageID) object {
	if id == 0 {
		return o
	}
	return append(o, member{"last_message", messageObject(tg.Message{ID: id, ChatID: chat}, messageOptions{})})
}

// pendingState is the sending_state of a message not yet on the server.
func pendingState() object {
	return object{{"@type", "messageSendingStatePending"}, {"sending_id", 0}}
}

// failedState is the sending_state of a message that failed to send.
func failedState(e object) object {
	// A flood wait can be retried once it has passed, and TDLib says when.
	var retryAfter float64
	for _, m := range e {
		if m.key == "message" {
			if d, ok := floodWaitOf(m.val); ok {
				retryAfter = d.Seconds()
			}
		}
	}
	return object{
		{"@type", "messageSendingStateFailed"},
		{"error", e},
		{"can_retry", retryAfter > 0},
		{"need_another_sender", false},
		{"need_another_reply_quote", false},
		{"need_drop_reply", false},
		{"retry_after", retryAfter},
	}
}

// floodWaitOf reads the wait of a 429 message ("Too Many Requests: retry
// after N").
func floodWaitOf(message any) (time.Duration, bool) {
	text, ok := message.(string)
	if !ok {
		return 0, false
	}
	rest, ok := strings.CutPrefix(text, "Too Many Requests: retry after ")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n <= 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// supergroupID is the supergroup of a channel or supergroup chat: TDLib's
// chat id is -1000000000000 - supergroup_id.
func supergroupID(chat tg.ChatID) int64 { return -1_000_000_000_000 - int64(chat) }

// isBasicGroup reports whether chat is a basic group's: TDLib's chat id of
// basic group g is -g, above the supergroups' -1000000000000 - s.
func isBasicGroup(chat tg.ChatID) bool { return chat < 0 && chat > -1_000_000_000_000 }

// updateBasicGroup is TDLib's updateBasicGroup of chat's group with the
// account's status, is_active and the supergroup it was upgraded to (0 if
// none). The member count is not modelled.
func updateBasicGroup(chat tg.ChatID, status string, active bool, upgradedTo int64) object {
	return object{{"@type", "updateBasicGroup"}, {"basic_group", object{
		{"@type", "basicGroup"},
		{"id", -int64(chat)},
		{"member_count", 0},
		{"status", memberStatus(status)},
		{"is_active", active},
		{"upgraded_to_supergroup_id", upgradedTo},
	}}}
}

// chatObject is TDLib's chat. A private chat's user is the chat id itself,
// as in TDLib.
func chatObject(c tg.Chat) object {
	var typ object
	switch c.Kind {
	case tg.KindPrivate:
		typ = object{{"@type", "chatTypePrivate"}, {"user_id", int64(c.ID)}}
	case tg.KindBasicGroup:
		typ = object{{"@type", "chatTypeBasicGroup"}, {"basic_group_id", -int64(c.ID)}}
	default:
		typ = object{
			{"@type", "chatTypeSupergroup"},
			{"supergroup_id", supergroupID(c.ID)},
			{"is_channel", c.Kind == tg.KindChannel},
		}
	}
	o := withLastMessage(object{
		{"@type", "chat"},
		{"id", int64(c.ID)},
		{"type", typ},
		{"title", c.Title},
		{"accent_color_id", 0},
		{"background_custom_emoji_id", "0"},
		{"profile_accent_color_id", -1},
		{"profile_background_custom_emoji_id", "0"},
		{"permissions", chatPermissions(c.Kind)},
	}, c.ID, c.LastMessageID)
	return append(o, object{
		{"positions", []any{}},
		{"chat_lists", []any{}},
		{"has_protected_content", c.Protected},
		{"is_translatable", false},
		{"is_marked_as_unread", false},
		{"view_as_topics", c.Kind == tg.KindForum},
		{"has_scheduled_messages", false},
		{"can_be_deleted_only_for_self", false},
		{"can_be_deleted_for_all_users", false},
		{"can_be_reported", true},
		{"default_disable_notification", false},
		{"unread_count", 0},
		// Read up to the last message, which is always a server one:
		// the session's own local last message is read past the server
		// message it followed.
		{"last_read_inbox_message_id", int64(tg.MessageIDFromServer(c.LastMessageID.ServerFloor()))},
		{"last_read_outbox_message_id", 0},
		{"unread_mention_count", 0},
		{"unread_reaction_count", 0},
		{"notification_settings", defaultNotificationSettings()},
		{"available_reactions", object{{"@type", "chatAvailableReactionsAll"}, {"max_reaction_count", 11}}},
		{"message_auto_delete_time", 0},
		{"theme_name", ""},
		{"video_chat", object{{"@type", "videoChat"}, {"group_call_id", 0}, {"has_participants", false}}},
		{"reply_markup_message_id", 0},
		{"client_data", ""},
	}...)
}

// chatPermissions are the default permissions of a chat's members: none
// in a channel, where only administrators post; sending anything but not
// managing the chat elsewhere, as a new group has.
func chatPermissions(kind tg.ChatKind) object {
	member := kind != tg.KindChannel
	return object{
		{"@type", "chatPermissions"},
		{"can_send_basic_messages", member},
		{"can_send_audios", member},
		{"can_send_documents", member},
		{"can_send_photos", member},
		{"can_send_videos", member},
		{"can_send_video_notes", member},
		{"can_send_voice_notes", member},
		{"can_send_polls", member},
		{"can_send_other_messages", member},
		{"can_add_link_previews", member},
		{"can_change_info", false},
		{"can_invite_users", member},
		{"can_pin_messages", false},
		{"can_create_topics", false},
	}
}

// defaultNotificationSettings are the notification settings of a chat or
// topic that uses the account's defaults throughout.
func defaultNotificationSettings() object {
	return object{
		{"@type", "chatNotificationSettings"},
		{"use_default_mute_for", true},
		{"mute_for", 0},
		{"use_default_sound", true},
		{"sound_id", "0"},
		{"use_default_show_preview", true},
		{"show_preview", false},
		{"use_default_mute_stories", true},
		{"mute_stories", false},
		{"use_default_story_sound", true},
		{"story_sound_id", "0"},
		{"use_default_show_story_sender", true},
		{"show_story_sender", false},
		{"use_default_disable_pinned_message_notifications", true},
		{"disable_pinned_message_notifications", false},
		{"use_default_disable_mention_notifications", true},
		{"disable_mention_notifications", false},
	}
}

// supergroupObject is TDLib's supergroup of a chat of the given kind.
func supergroupObject(id int64, kind tg.ChatKind) object {
	return supergroupWithStatus(id, kind, "chatMemberStatusMember")
}

// supergroupWithStatus is a supergroup object with the account's status in
// it (chatMemberStatusMember, or chatMemberStatusLeft once access is lost).
func supergroupWithStatus(id int64, kind tg.ChatKind, status string) object {
	return object{
		{"@type", "supergroup"},
		{"id", id},
		{"date", 0},
		{"status", memberStatus(status)},
		{"member_count", 0},
		{"boost_level", 0},
		{"has_linked_chat", false},
		{"has_location", false},
		{"sign_messages", false},
		{"show_message_sender", false},
		{"join_to_send_messages", kind != tg.KindChannel},
		{"join_by_request", false},
		{"is_slow_mode_enabled", false},
		{"is_channel", kind == tg.KindChannel},
		{"is_broadcast_group", false},
		{"is_forum", kind == tg.KindForum},
		{"is_verified", false},
		{"has_sensitive_content", false},
		{"restriction_reason", ""},
		{"is_scam", false},
		{"is_fake", false},
		{"has_active_stories", false},
		{"has_unread_active_stories", false},
	}
}

// userObject is TDLib's user for the logged-in account. The simulator's
// username doubles as the first name.
func userObject(u tg.User) object {
	var active []string
	if u.Username != "" {
		active = []string{u.Username}
	}
	return object{
		{"@type", "user"},
		{"id", u.ID},
		{"first_name", u.Username},
		{"last_name", ""},
		{"usernames", object{
			{"@type", "usernames"},
			{"active_usernames", nonNil(active)},
			{"disabled_usernames", []string{}},
			{"editable_username", u.Username},
		}},
		{"phone_number", ""},
		{"status", typed("userStatusEmpty")},
		{"accent_color_id", 0},
		{"background_custom_emoji_id", "0"},
		{"profile_accent_color_id", -1},
		{"profile_background_custom_emoji_id", "0"},
		{"is_contact", false},
		{"is_mutual_contact", false},
		{"is_close_friend", false},
		{"is_verified", false},
		{"is_premium", u.IsPremium},
		{"is_support", false},
		{"restriction_reason", ""},
		{"is_scam", false},
		{"is_fake", false},
		{"has_active_stories", false},
		{"has_unread_active_stories", false},
		{"restricts_new_chats", false},
		{"have_access", true},
		{"type", typed("userTypeRegular")},
		{"language_code", ""},
		{"added_to_attachment_menu", false},
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// foundChatMessagesObject is searchChatMessages' answer. total_count is an
// estimate in TDLib; the simulator reports the page's length.
func foundChatMessagesObject(msgs []tg.Message) object {
	list := make([]object, len(msgs))
	for i, m := range msgs {
		list[i] = messageObject(m, messageOptions{})
	}
	var next int64
	if len(msgs) > 0 {
		next = int64(msgs[len(msgs)-1].ID)
	}
	return object{
		{"@type", "foundChatMessages"},
		{"total_count", len(msgs)},
		{"messages", list},
		{"next_from_message_id", next},
	}
}

// messagesObject is getChatHistory's answer (messages): total_count is
// the page's size, as TDLib reports for history. opts gives each message's
// options (viewOptions).
func messagesObject(msgs []tg.Message, opts func(tg.Message) messageOptions) object {
	list := make([]object, len(msgs))
	for i, m := range msgs {
		list[i] = messageObject(m, opts(m))
	}
	return object{
		{"@type", "messages"},
		{"total_count", len(msgs)},
		{"messages", list},
	}
}

// optionValueObject renders an option's text as TDLib's OptionValue: empty,
// boolean, integer (an int64, written as a string) or string. version and
// commit_hash are strings whatever they look like.
func optionValueObject(name, value string) object {
	if name != "version" && name != "commit_hash" {
		switch {
		case value == "":
			return typed("optionValueEmpty")
		case value == "true" || value == "false":
			return object{{"@type", "optionValueBoolean"}, {"value", value == "true"}}
		}
		if n, err := strconv.ParseInt(value, 10, 64); err == nil {
			return object{{"@type", "optionValueInteger"}, {"value", int64String(n)}}
		}
	}
	return object{{"@type", "optionValueString"}, {"value", value}}
}

// updateOption reports an option's value.
func updateOption(name, value string) object {
	return object{{"@type", "updateOption"}, {"name", name}, {"value", optionValueObject(name, value)}}
}

// connectionStateObject maps tg.ConnReady to connectionStateReady and so
// on: the port's names are TDLib's without the prefix.
func connectionStateObject(s tg.ConnectionState) object {
	r, n := utf8.DecodeRuneInString(string(s))
	return typed("connectionState" + string(unicode.ToUpper(r)) + string(s)[n:])
}

// authorizationStateObject is TDLib's AuthorizationState of the given name
// (one of the authorizationState* names). The phone-number state carries no
// settings.
func authorizationStateObject(name string) object { return typed(name) }

// updateAuthorizationState reports an authorization state.
func updateAuthorizationState(name string) object {
	return object{{"@type", "updateAuthorizationState"}, {"authorization_state", authorizationStateObject(name)}}
}

// updateObject writes one of the simulator's updates as TDLib's. failed
// is the message a failed send was about, when the session still has it.
func updateObject(u tg.Update, failed *tg.Message) (object, error) {
	switch u := u.(type) {
	case tg.NewMessage:
		var o messageOptions
		if !u.Message.ID.IsServer() {
			// The only local message announced: the session's own, as
			// its send starts.
			o = messageOptions{outgoing: true, sendingState: pendingState()}
		}
		return object{{"@type", "updateNewMessage"}, {"message", messageObject(u.Message, o)}}, nil
	case tg.ChatAccessLost:
		if isBasicGroup(u.Chat) {
			// A member removed from a basic group gets the group as
			// chatForbidden from the server, which TDLib shows as banned.
			return updateBasicGroup(u.Chat, "chatMemberStatusBanned", true, 0), nil
		}
		// The kind is not in the update; is_channel and is_forum do not
		// matter to a client told it has left.
		return object{{"@type", "updateSupergroup"}, {"supergroup", supergroupWithStatus(supergroupID(u.Chat), tg.KindSupergroup, "chatMemberStatusLeft")}}, nil
	case tg.ChatAccessHeld:
		if isBasicGroup(u.Chat) {
			return updateBasicGroup(u.Chat, "chatMemberStatusMember", true, 0), nil
		}
		return object{{"@type", "updateSupergroup"}, {"supergroup", supergroupWithStatus(supergroupID(u.Chat), tg.KindSupergroup, "chatMemberStatusMember")}}, nil
	case tg.ChatUpgraded:
		// The upgrade deactivates the group, and TDLib shows the status
		// in a deactivated group as banned, whatever the account's.
		return updateBasicGroup(u.From, "chatMemberStatusBanned", false, supergroupID(u.To)), nil
	case tg.ChatLastMessage:
		out := withLastMessage(object{{"@type", "updateChatLastMessage"}, {"chat_id", int64(u.Chat)}}, u.Chat, u.LastMessageID)
		return append(out, member{"positions", []any{}}), nil
	case tg.ConnectionStateChanged:
		return object{{"@type", "updateConnectionState"}, {"state", connectionStateObject(u.State)}}, nil
	case tg.SendSucceeded:
		return object{
			{"@type", "updateMessageSendSucceeded"},
			{"message", messageObject(u.Message, messageOptions{outgoing: true})},
			{"old_message_id", int64(u.OldMessageID)},
		}, nil
	case tg.SendFailed:
		e := errorFor(u.Err)
		m := tg.Message{ID: u.OldMessageID, ChatID: u.Chat}
		if failed != nil {
			m = *failed
		}
		if u.MessageID != 0 { // TDLib keeps the failed message under a new local id
			m.ID = u.MessageID
		}
		return object{
			{"@type", "updateMessageSendFailed"},
			{"message", messageObject(m, messageOptions{outgoing: true, sendingState: failedState(e)})},
			{"old_message_id", int64(u.OldMessageID)},
			{"error", e},
		}, nil
	case tg.MessagesDeleted:
		ids := make([]int64, len(u.IDs))
		for i, id := range u.IDs {
			ids[i] = int64(id)
		}
		return object{
			{"@type", "updateDeleteMessages"},
			{"chat_id", int64(u.Chat)},
			{"message_ids", ids},
			{"is_permanent", u.IsPermanent},
			{"from_cache", u.FromCache},
		}, nil
	case tg.FileUpdated:
		return object{{"@type", "updateFile"}, {"file", fileObject(u.File)}}, nil
	case tg.OptionChanged:
		return updateOption(u.Name, u.Value), nil
	case tg.ForumTopicInfo:
		return object{
			{"@type", "updateForumTopicInfo"},
			{"chat_id", int64(u.Topic.ChatID)},
			{"info", forumTopicInfoObject(u.Topic)},
		}, nil
	case tg.MessageContentChanged:
		// The port's update has no content (stashd fetches the message),
		// and the simulator does not hand it out: TDLib's placeholder for
		// content it cannot show stands in.
		return object{
			{"@type", "updateMessageContent"},
			{"chat_id", int64(u.Chat)},
			{"message_id", int64(u.Message)},
			{"new_content", typed("messageUnsupported")},
		}, nil
	case tg.MessageEdited:
		return messageEditedObject(u), nil
	}
	return nil, fmt.Errorf("encode update: unknown type %T", u)
}

// memberStatus is a chatMemberStatus object with the fields td_api.tl
// gives its constructor.
func memberStatus(status string) object {
	switch status {
	case "chatMemberStatusMember":
		return object{{"@type", status}, {"member_until_date", 0}}
	case "chatMemberStatusBanned":
		return object{{"@type", status}, {"banned_until_date", 0}}
	}
	return typed(status)
}
