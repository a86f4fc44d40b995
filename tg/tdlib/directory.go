package tdlib

import (
	"encoding/json"
	"fmt"

	"stashd/tg"
)

// getChatsRequest builds getChats(chat_list, limit).
func getChatsRequest(archive bool, limit int) request {
	list := chatListMain
	if archive {
		list = chatListArchive
	}
	return request{tg.MethodGetChats, map[string]any{"chat_list": obj(list), "limit": limit}}
}

// supergroupOfChat is the supergroup id behind a channel or supergroup
// chat id (-1000000000000 - supergroup_id), or 0 for any other chat.
func supergroupOfChat(chat tg.ChatID) int64 {
	if chat >= -1_000_000_000_000 {
		return 0
	}
	return -1_000_000_000_000 - int64(chat)
}

// decodeChats reads the chat ids of a chats object.
func decodeChats(data []byte) ([]tg.ChatID, error) {
	var c struct {
		ChatIDs []tdInt `json:"chat_ids"`
	}
	if err := decodeAs(data, "chats", &c); err != nil {
		return nil, err
	}
	out := make([]tg.ChatID, len(c.ChatIDs))
	for i, id := range c.ChatIDs {
		out[i] = tg.ChatID(id)
	}
	return out, nil
}

// tdPermissions is chatPermissions, reduced to sending documents.
type tdPermissions struct {
	CanSendDocuments bool `json:"can_send_documents"`
}

// decodeSupergroup reads a supergroup object: its public username, and the
// account's status with the rights stashd needs (posting documents,
// managing forum topics). A member of a supergroup posts as its default
// permissions allow, which live in the chat: chatPerms.
func decodeSupergroup(data []byte, chatPerms tdPermissions) (tg.Supergroup, error) {
	var s struct {
		Usernames *struct {
			ActiveUsernames []string `json:"active_usernames"`
		} `json:"usernames"`
		IsChannel bool `json:"is_channel"`
		IsForum   bool `json:"is_forum"`
		Status    struct {
			Type   string `json:"@type"`
			Rights *struct {
				CanPostMessages bool `json:"can_post_messages"`
				CanManageTopics bool `json:"can_manage_topics"`
			} `json:"rights"`
			IsMember    bool           `json:"is_member"`
			Permissions *tdPermissions `json:"permissions"`
		} `json:"status"`
	}
	if err := decodeAs(data, "supergroup", &s); err != nil {
		return tg.Supergroup{}, err
	}
	out := tg.Supergroup{IsChannel: s.IsChannel, IsForum: s.IsForum}
	if s.Usernames != nil && len(s.Usernames.ActiveUsernames) > 0 {
		out.Username = s.Usernames.ActiveUsernames[0]
	}
	switch s.Status.Type {
	case "chatMemberStatusCreator":
		out.Status, out.CanPost, out.CanManageTopics = tg.MemberCreator, true, s.IsForum
	case "chatMemberStatusAdministrator":
		out.Status = tg.MemberAdministrator
		if s.Status.Rights != nil {
			// In a supergroup an administrator may always post; in a
			// channel only with can_post_messages.
			out.CanPost = !s.IsChannel || s.Status.Rights.CanPostMessages
			out.CanManageTopics = s.Status.Rights.CanManageTopics
		}
	case "chatMemberStatusMember":
		out.Status, out.CanPost = tg.MemberMember, !s.IsChannel && chatPerms.CanSendDocuments
	case "chatMemberStatusRestricted":
		// A restricted user who is not a member has, for stashd, left.
		out.Status = tg.MemberLeft
		if s.Status.IsMember {
			out.Status = tg.MemberRestricted
			out.CanPost = s.Status.Permissions != nil && s.Status.Permissions.CanSendDocuments
		}
	case "chatMemberStatusLeft":
		out.Status = tg.MemberLeft
	case "chatMemberStatusBanned":
		out.Status = tg.MemberBanned
	default:
		return tg.Supergroup{}, fmt.Errorf("decode supergroup: unknown member status %q", s.Status.Type)
	}
	return out, nil
}

// decodeChatPermissions reads a chat's default member permissions.
func decodeChatPermissions(data json.RawMessage) (tdPermissions, error) {
	var c struct {
		Permissions tdPermissions `json:"permissions"`
	}
	if err := decodeAs(data, "chat", &c); err != nil {
		return tdPermissions{}, err
	}
	return c.Permissions, nil
}
