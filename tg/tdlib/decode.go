package tdlib

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"stashd/tg"
)

// This file turns TDLib JSON (as TDLib 1.8.40 writes it, and as go-tdlib
// re-encodes the updates it has decoded) into tg's types. It reads only the
// fields stashd uses; everything else in TDLib's objects is ignored.

// tdInt is an integer field of a TDLib object. TDLib writes int32 and int53
// as JSON numbers and int64 as strings ("media_album_id":"1381...");
// go-tdlib's re-encoding writes some int64 fields as numbers. Both are
// accepted, and null is zero.
type tdInt int64

func (n *tdInt) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = 0
		return nil
	}
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("parse integer %q: %w", b, err)
	}
	*n = tdInt(v)
	return nil
}

// tdType is the "@type" every TDLib object carries.
type tdType struct {
	Type string `json:"@type"`
}

// decodeAs decodes data into v after checking that it is a want object.
// An object without "@type" is accepted: TDLib omits it where the type is
// fixed by the schema.
func decodeAs(data []byte, want string, v any) error {
	var t tdType
	if err := json.Unmarshal(data, &t); err != nil {
		return fmt.Errorf("decode %s: %w", want, err)
	}
	if t.Type != "" && t.Type != want {
		return fmt.Errorf("decode %s: got a %s", want, t.Type)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", want, err)
	}
	return nil
}

// tdFile is TDLib's file: file id:int32 size:int53 expected_size:int53
// local:localFile remote:remoteFile.
type tdFile struct {
	ID           tdInt `json:"id"`
	Size         tdInt `json:"size"`
	ExpectedSize tdInt `json:"expected_size"`
	Local        struct {
		Path                   string `json:"path"`
		IsDownloadingActive    bool   `json:"is_downloading_active"`
		IsDownloadingCompleted bool   `json:"is_downloading_completed"`
		DownloadedSize         tdInt  `json:"downloaded_size"`
	} `json:"local"`
	Remote struct {
		ID       string `json:"id"`
		UniqueID string `json:"unique_id"`
	} `json:"remote"`
}

func (f tdFile) port() tg.File {
	size := int64(f.Size)
	if size == 0 {
		// size is 0 while TDLib does not know it exactly; expected_size is
		// its estimate, better than nothing for limits and progress.
		size = int64(f.ExpectedSize)
	}
	out := tg.File{
		ID:             int32(f.ID),
		Size:           size,
		RemoteID:       f.Remote.ID,
		UniqueID:       f.Remote.UniqueID,
		Downloaded:     int64(f.Local.DownloadedSize),
		DownloadDone:   f.Local.IsDownloadingCompleted,
		DownloadActive: f.Local.IsDownloadingActive,
	}
	// TDLib fills local.path while a download is still partial; the port
	// promises a path only for a complete file.
	if f.Local.IsDownloadingCompleted {
		out.LocalPath = f.Local.Path
	}
	return out
}

// tdMessageContent is the part of a MessageContent stashd reads: the
// document of a messageDocument, and the caption that documents, photos,
// videos, audios, animations and voice notes all carry.
type tdMessageContent struct {
	Type     string `json:"@type"`
	Document *struct {
		FileName string `json:"file_name"`
		MimeType string `json:"mime_type"`
		Document tdFile `json:"document"`
	} `json:"document"`
	Caption *struct {
		Text string `json:"text"`
	} `json:"caption"`
	// SupergroupID is set on messageChatUpgradeTo: the basic group was
	// upgraded to this supergroup.
	SupergroupID tdInt `json:"supergroup_id"`
}

// tdMessage is TDLib's message, reduced.
type tdMessage struct {
	ID              tdInt `json:"id"`
	ChatID          tdInt `json:"chat_id"`
	Date            tdInt `json:"date"`
	EditDate        tdInt `json:"edit_date"`
	IsTopicMessage  bool  `json:"is_topic_message"`
	MessageThreadID tdInt `json:"message_thread_id"`
	MediaAlbumID    tdInt `json:"media_album_id"`
	// CanBeSaved is false in chats with protected content; absent means
	// savable.
	CanBeSaved *bool            `json:"can_be_saved"`
	Content    tdMessageContent `json:"content"`
}

func (m tdMessage) port() tg.Message {
	out := tg.Message{
		// TDLib message ids are kept as they are (server id << 20); tg's
		// helpers convert.
		ID:             tg.MessageID(m.ID),
		ChatID:         tg.ChatID(m.ChatID),
		Date:           time.Unix(int64(m.Date), 0).UTC(),
		ThreadID:       int64(m.MessageThreadID),
		IsTopicMessage: m.IsTopicMessage,
		AlbumID:        int64(m.MediaAlbumID),
		Protected:      m.CanBeSaved != nil && !*m.CanBeSaved,
	}
	if m.EditDate != 0 {
		out.EditDate = time.Unix(int64(m.EditDate), 0).UTC()
	}
	if m.Content.Caption != nil {
		out.Caption = m.Content.Caption.Text
	}
	if m.Content.Type == "messageDocument" && m.Content.Document != nil {
		d := m.Content.Document
		out.Document = &tg.Document{FileName: d.FileName, MimeType: d.MimeType, File: d.Document.port()}
	}
	if m.Content.Type == "messageChatUpgradeTo" && m.Content.SupergroupID != 0 {
		out.UpgradedTo = supergroupChat(int64(m.Content.SupergroupID))
	}
	return out
}

// supergroupChat is the chat id of supergroup s in TDLib:
// -1000000000000 - s.
func supergroupChat(s int64) tg.ChatID { return tg.ChatID(-1_000_000_000_000 - s) }

// messageIDOf is the id of a possibly null message.
func messageIDOf(m *tdMessage) tg.MessageID {
	if m == nil {
		return 0
	}
	return tg.MessageID(m.ID)
}

func decodeMessage(data []byte) (tg.Message, error) {
	var m tdMessage
	if err := decodeAs(data, "message", &m); err != nil {
		return tg.Message{}, err
	}
	return m.port(), nil
}

// decodeMessages decodes the message list of a foundChatMessages
// (searchChatMessages) or a messages object.
func decodeMessages(data []byte) ([]tg.Message, error) {
	var t tdType
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("decode messages: %w", err)
	}
	var v struct {
		Messages []*tdMessage `json:"messages"`
	}
	if err := decodeAs(data, cmpType(t.Type, "foundChatMessages", "messages"), &v); err != nil {
		return nil, err
	}
	out := make([]tg.Message, 0, len(v.Messages))
	for _, m := range v.Messages {
		// getMessages answers null for a message it cannot find; skip it.
		if m != nil {
			out = append(out, m.port())
		}
	}
	return out, nil
}

// cmpType returns got when it is one of the accepted types, else the first
// of them (so that decodeAs reports the mismatch).
func cmpType(got string, accepted ...string) string {
	for _, a := range accepted {
		if got == a {
			return got
		}
	}
	return accepted[0]
}

func decodeFile(data []byte) (tg.File, error) {
	var f tdFile
	if err := decodeAs(data, "file", &f); err != nil {
		return tg.File{}, err
	}
	return f.port(), nil
}

// tdChat is TDLib's chat, reduced.
type tdChat struct {
	ID   tdInt `json:"id"`
	Type struct {
		Type         string `json:"@type"`
		SupergroupID tdInt  `json:"supergroup_id"`
		IsChannel    bool   `json:"is_channel"`
	} `json:"type"`
	Title               string     `json:"title"`
	LastMessage         *tdMessage `json:"last_message"`
	HasProtectedContent bool       `json:"has_protected_content"`
}

// decodeChat decodes a chat. A supergroup that is not a channel may be a
// forum, which only its supergroup object tells: then the returned
// supergroup id is non-zero and the caller settles the kind with
// decodeSupergroupIsForum.
func decodeChat(data []byte) (tg.Chat, int64, error) {
	var c tdChat
	if err := decodeAs(data, "chat", &c); err != nil {
		return tg.Chat{}, 0, err
	}
	out := tg.Chat{ID: tg.ChatID(c.ID), Title: c.Title, LastMessageID: messageIDOf(c.LastMessage),
		Protected: c.HasProtectedContent}
	var supergroup int64
	switch c.Type.Type {
	case "chatTypeSupergroup":
		if c.Type.IsChannel {
			out.Kind = tg.KindChannel
		} else {
			out.Kind = tg.KindSupergroup
			supergroup = int64(c.Type.SupergroupID)
		}
	case "chatTypeBasicGroup":
		// Message ids of a basic group come from the account's message
		// box: no per-chat continuity (see tg.KindBasicGroup).
		out.Kind = tg.KindBasicGroup
	case "chatTypePrivate", "chatTypeSecret":
		out.Kind = tg.KindPrivate
	default:
		return tg.Chat{}, 0, fmt.Errorf("decode chat %d: unknown chat type %q", c.ID, c.Type.Type)
	}
	return out, supergroup, nil
}

// decodeSupergroupIsForum reads is_forum from a supergroup object.
func decodeSupergroupIsForum(data []byte) (bool, error) {
	var s struct {
		IsForum bool `json:"is_forum"`
	}
	if err := decodeAs(data, "supergroup", &s); err != nil {
		return false, err
	}
	return s.IsForum, nil
}

func decodeUser(data []byte) (tg.User, error) {
	var u struct {
		ID        tdInt `json:"id"`
		Usernames *struct {
			ActiveUsernames []string `json:"active_usernames"`
		} `json:"usernames"`
		IsPremium bool `json:"is_premium"`
	}
	if err := decodeAs(data, "user", &u); err != nil {
		return tg.User{}, err
	}
	out := tg.User{ID: int64(u.ID), IsPremium: u.IsPremium}
	// The first active username is the one Telegram shows.
	if u.Usernames != nil && len(u.Usernames.ActiveUsernames) > 0 {
		out.Username = u.Usernames.ActiveUsernames[0]
	}
	return out, nil
}

// tdForumTopicInfo is TDLib's forumTopicInfo, reduced.
type tdForumTopicInfo struct {
	MessageThreadID tdInt  `json:"message_thread_id"`
	Name            string `json:"name"`
	IsClosed        bool   `json:"is_closed"`
}

// decodeForumTopic decodes a forumTopic (getForumTopic) of chat. Its
// last_message may be null.
func decodeForumTopic(chat tg.ChatID, data []byte) (tg.Topic, error) {
	var t struct {
		Info        tdForumTopicInfo `json:"info"`
		LastMessage *tdMessage       `json:"last_message"`
	}
	if err := decodeAs(data, "forumTopic", &t); err != nil {
		return tg.Topic{}, err
	}
	return tg.Topic{
		ChatID:        chat,
		ThreadID:      int64(t.Info.MessageThreadID),
		Name:          t.Info.Name,
		LastMessageID: messageIDOf(t.LastMessage),
		IsClosed:      t.Info.IsClosed,
	}, nil
}

// decodeForumTopics decodes forumTopics (getForumTopics) of chat: a page
// of topics and the offsets of the next page (zero after an empty one).
func decodeForumTopics(chat tg.ChatID, data []byte) (tg.TopicPage, error) {
	var v struct {
		TotalCount          tdInt             `json:"total_count"`
		Topics              []json.RawMessage `json:"topics"`
		NextOffsetDate      tdInt             `json:"next_offset_date"`
		NextOffsetMessageID tdInt             `json:"next_offset_message_id"`
		NextOffsetThreadID  tdInt             `json:"next_offset_message_thread_id"`
	}
	if err := decodeAs(data, "forumTopics", &v); err != nil {
		return tg.TopicPage{}, err
	}
	page := tg.TopicPage{
		Topics:     make([]tg.Topic, 0, len(v.Topics)),
		TotalCount: int(v.TotalCount),
		Next:       tg.TopicOffset{MessageID: tg.MessageID(v.NextOffsetMessageID), ThreadID: int64(v.NextOffsetThreadID)},
	}
	if v.NextOffsetDate != 0 {
		page.Next.Date = time.Unix(int64(v.NextOffsetDate), 0)
	}
	for _, raw := range v.Topics {
		t, err := decodeForumTopic(chat, raw)
		if err != nil {
			return tg.TopicPage{}, err
		}
		page.Topics = append(page.Topics, t)
	}
	return page, nil
}

// decodeForumTopicInfo returns the thread id of a forumTopicInfo
// (createForumTopic's answer).
func decodeForumTopicInfo(data []byte) (int64, error) {
	var t tdForumTopicInfo
	if err := decodeAs(data, "forumTopicInfo", &t); err != nil {
		return 0, err
	}
	if t.MessageThreadID <= 0 {
		return 0, fmt.Errorf("forumTopicInfo without a message_thread_id")
	}
	return int64(t.MessageThreadID), nil
}

// decodeOptionValue renders an OptionValue as text: "true"/"false", the
// integer in decimal, the string, or "" for optionValueEmpty.
func decodeOptionValue(data []byte) (string, error) {
	if len(data) == 0 || string(data) == "null" {
		return "", nil
	}
	var v struct {
		Type  string          `json:"@type"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return "", fmt.Errorf("decode option value: %w", err)
	}
	switch v.Type {
	case "optionValueEmpty":
		return "", nil
	case "optionValueBoolean":
		var b bool
		if err := json.Unmarshal(v.Value, &b); err != nil {
			return "", fmt.Errorf("decode option value: %w", err)
		}
		return strconv.FormatBool(b), nil
	case "optionValueInteger":
		var n tdInt
		if err := json.Unmarshal(v.Value, &n); err != nil {
			return "", fmt.Errorf("decode option value: %w", err)
		}
		return strconv.FormatInt(int64(n), 10), nil
	case "optionValueString":
		var s string
		if err := json.Unmarshal(v.Value, &s); err != nil {
			return "", fmt.Errorf("decode option value: %w", err)
		}
		return s, nil
	}
	return "", fmt.Errorf("decode option value: unknown type %q", v.Type)
}

// connectionState maps "connectionStateWaitingForNetwork" to
// tg.ConnWaitingForNetwork and so on: the port's names are TDLib's without
// the prefix.
func connectionState(typ string) (tg.ConnectionState, error) {
	rest, ok := strings.CutPrefix(typ, "connectionState")
	if !ok || rest == "" {
		return "", fmt.Errorf("decode connection state: unknown type %q", typ)
	}
	r, n := utf8.DecodeRuneInString(rest)
	return tg.ConnectionState(string(unicode.ToLower(r)) + rest[n:]), nil
}

// tdUpdate holds the fields of every update type the port carries; each
// type uses its own few.
type tdUpdate struct {
	Type         string            `json:"@type"`
	Message      *tdMessage        `json:"message"`
	ChatID       tdInt             `json:"chat_id"`
	MessageID    tdInt             `json:"message_id"`
	LastMessage  *tdMessage        `json:"last_message"`
	State        *tdType           `json:"state"`
	OldMessageID tdInt             `json:"old_message_id"`
	Error        *tdError          `json:"error"`
	File         *tdFile           `json:"file"`
	Name         string            `json:"name"`
	Value        json.RawMessage   `json:"value"`
	Info         *tdForumTopicInfo `json:"info"`
	MessageIDs   []tdInt           `json:"message_ids"`
	IsPermanent  bool              `json:"is_permanent"`
	FromCache    bool              `json:"from_cache"`
	Supergroup   *struct {
		ID     tdInt          `json:"id"`
		Status tdMemberStatus `json:"status"`
	} `json:"supergroup"`
	BasicGroup *struct {
		ID                     tdInt          `json:"id"`
		Status                 tdMemberStatus `json:"status"`
		IsActive               bool           `json:"is_active"`
		UpgradedToSupergroupID tdInt          `json:"upgraded_to_supergroup_id"`
	} `json:"basic_group"`
}

// tdMemberStatus is TDLib's ChatMemberStatus, reduced.
type tdMemberStatus struct {
	Type     string `json:"@type"`
	IsMember bool   `json:"is_member"`
}

// accessReport is the account's status st in chat as the port tells it:
// whether the account can read the chat. ok is false for a creator who
// left, who may come back at will: no loss to tell.
func accessReport(chat tg.ChatID, st tdMemberStatus) (tg.Update, bool) {
	switch st.Type {
	case "chatMemberStatusLeft", "chatMemberStatusBanned":
		return tg.ChatAccessLost{Chat: chat}, true
	case "chatMemberStatusMember", "chatMemberStatusAdministrator":
		return tg.ChatAccessHeld{Chat: chat}, true
	case "chatMemberStatusRestricted", "chatMemberStatusCreator":
		if st.IsMember {
			return tg.ChatAccessHeld{Chat: chat}, true
		}
		if st.Type == "chatMemberStatusRestricted" {
			return tg.ChatAccessLost{Chat: chat}, true
		}
	}
	return nil, false
}

// isPortUpdate reports whether decodeUpdate translates the TDLib update
// type typ. The pump asks first, so that it re-encodes only these.
func isPortUpdate(typ string) bool {
	switch typ {
	case "updateNewMessage", "updateChatLastMessage", "updateConnectionState",
		"updateMessageSendSucceeded", "updateMessageSendFailed", "updateFile",
		"updateOption", "updateForumTopicInfo", "updateMessageContent", "updateDeleteMessages", "updateSupergroup",
		"updateBasicGroup":
		return true
	}
	return false
}

// decodeUpdate translates one TDLib update. ok is false for the update
// types the port does not carry (TDLib sends many more than stashd uses).
func decodeUpdate(data []byte) (u tg.Update, ok bool, err error) {
	var t tdType
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, false, fmt.Errorf("decode update: %w", err)
	}
	if !isPortUpdate(t.Type) {
		return nil, false, nil
	}
	var v tdUpdate
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, false, fmt.Errorf("decode %s: %w", t.Type, err)
	}
	missing := func(field string) error { return fmt.Errorf("decode %s: no %s", t.Type, field) }
	switch v.Type {
	case "updateNewMessage":
		if v.Message == nil {
			return nil, false, missing("message")
		}
		return tg.NewMessage{Message: v.Message.port()}, true, nil
	case "updateChatLastMessage":
		return tg.ChatLastMessage{Chat: tg.ChatID(v.ChatID), LastMessageID: messageIDOf(v.LastMessage)}, true, nil
	case "updateConnectionState":
		if v.State == nil {
			return nil, false, missing("state")
		}
		s, err := connectionState(v.State.Type)
		if err != nil {
			return nil, false, err
		}
		return tg.ConnectionStateChanged{State: s}, true, nil
	case "updateMessageSendSucceeded":
		if v.Message == nil {
			return nil, false, missing("message")
		}
		return tg.SendSucceeded{Message: v.Message.port(), OldMessageID: tg.MessageID(v.OldMessageID)}, true, nil
	case "updateMessageSendFailed":
		if v.Message == nil || v.Error == nil {
			return nil, false, missing("message or error")
		}
		return tg.SendFailed{
			Chat:         tg.ChatID(v.Message.ChatID),
			OldMessageID: tg.MessageID(v.OldMessageID),
			MessageID:    tg.MessageID(v.Message.ID),
			Err:          mapError(v.Error.Code, v.Error.Message),
		}, true, nil
	case "updateFile":
		if v.File == nil {
			return nil, false, missing("file")
		}
		return tg.FileUpdated{File: v.File.port()}, true, nil
	case "updateOption":
		val, err := decodeOptionValue(v.Value)
		if err != nil {
			return nil, false, fmt.Errorf("decode option %s: %w", v.Name, err)
		}
		return tg.OptionChanged{Name: v.Name, Value: val}, true, nil
	case "updateForumTopicInfo":
		if v.Info == nil {
			return nil, false, missing("info")
		}
		return tg.ForumTopicInfo{Topic: tg.Topic{
			ChatID:   tg.ChatID(v.ChatID),
			ThreadID: int64(v.Info.MessageThreadID),
			Name:     v.Info.Name,
			IsClosed: v.Info.IsClosed,
		}}, true, nil
	case "updateMessageContent":
		return tg.MessageContentChanged{Chat: tg.ChatID(v.ChatID), Message: tg.MessageID(v.MessageID)}, true, nil
	case "updateDeleteMessages":
		// A pending send may end here instead of in succeeded or failed.
		ids := make([]tg.MessageID, len(v.MessageIDs))
		for i, id := range v.MessageIDs {
			ids[i] = tg.MessageID(id)
		}
		return tg.MessagesDeleted{Chat: tg.ChatID(v.ChatID), IDs: ids, IsPermanent: v.IsPermanent, FromCache: v.FromCache}, true, nil
	case "updateSupergroup":
		if v.Supergroup == nil {
			return nil, false, missing("supergroup")
		}
		// Only the account's status matters to stashd: whether it can
		// read the chat. The chat id of supergroup s is -1000000000000 - s.
		u, ok := accessReport(supergroupChat(int64(v.Supergroup.ID)), v.Supergroup.Status)
		return u, ok, nil
	case "updateBasicGroup":
		if v.BasicGroup == nil {
			return nil, false, missing("basic_group")
		}
		// An upgrade, or the account's status: whether it can read the
		// group (a member removed gets it as banned, one who left as
		// left). A basic group's chat id is -basic_group_id.
		chat := tg.ChatID(-int64(v.BasicGroup.ID))
		if v.BasicGroup.UpgradedToSupergroupID != 0 {
			// The group's messages continue in a new supergroup chat.
			return tg.ChatUpgraded{From: chat, To: supergroupChat(int64(v.BasicGroup.UpgradedToSupergroupID))}, true, nil
		}
		if !v.BasicGroup.IsActive {
			// TDLib shows every deactivated group's status as banned, the
			// account's own or not. An upgrade deactivates the group (one
			// that names no supergroup is an upgrade TDLib could not
			// read): no loss of the account's.
			return nil, false, nil
		}
		u, ok := accessReport(chat, v.BasicGroup.Status)
		return u, ok, nil
	}
	return nil, false, nil
}
