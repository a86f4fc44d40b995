package tdjsonsim

import (
	"context"
	"strings"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// getSupergroup answers getSupergroup(supergroup_id) for a supergroup a
// getChat has shown (TDLib knows it from then on), with the account's
// status as tgsim models it.
func (s *session) getSupergroup(cl *tgsim.Client, r *request) (object, error) {
	var p struct {
		SupergroupID tdInt `json:"supergroup_id"`
	}
	if err := r.params(&p); err != nil {
		return nil, err
	}
	s.mu.Lock()
	_, ok := s.kinds[int64(p.SupergroupID)]
	s.mu.Unlock()
	if !ok {
		return nil, tdError(400, "Supergroup not found")
	}
	sg, err := cl.Supergroup(supergroupChat(int64(p.SupergroupID)))
	if err != nil {
		return nil, err
	}
	return supergroupOf(int64(p.SupergroupID), sg), nil
}

// getChats answers getChats(chat_list, limit) with chats{total_count,
// chat_ids}: the ids of the list's chats, as tgsim's GetChats lists them.
func (s *session) getChats(ctx context.Context, cl *tgsim.Client, r *request) (object, error) {
	var p struct {
		ChatList *typeOnly `json:"chat_list"`
		Limit    tdInt     `json:"limit"`
	}
	if err := r.params(&p); err != nil {
		return nil, err
	}
	list := "chatListMain"
	if p.ChatList != nil {
		list = p.ChatList.Type
	}
	if list != "chatListMain" && list != "chatListArchive" {
		return nil, notSimulated("chat list " + list)
	}
	ids, err := cl.GetChats(ctx, list == "chatListArchive", int(p.Limit))
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return object{{"@type", "chats"}, {"total_count", len(out)}, {"chat_ids", out}}, nil
}

// supergroupChat is the chat of a supergroup id (see supergroupID).
func supergroupChat(id int64) tg.ChatID { return tg.ChatID(-1_000_000_000_000 - id) }

// supergroupOf is TDLib's supergroup for what tgsim reports: its public
// username and the account's status, an administrator's with its rights,
// a restricted member's with its permissions.
func supergroupOf(id int64, sg tg.Supergroup) object {
	kind := tg.KindSupergroup
	switch {
	case sg.IsChannel:
		kind = tg.KindChannel
	case sg.IsForum:
		kind = tg.KindForum
	}
	var status object
	switch sg.Status {
	case tg.MemberCreator:
		status = object{{"@type", "chatMemberStatusCreator"}, {"custom_title", ""}, {"is_anonymous", false}, {"is_member", true}}
	case tg.MemberAdministrator:
		status = object{{"@type", "chatMemberStatusAdministrator"}, {"custom_title", ""}, {"can_be_edited", false},
			{"rights", administratorRights(sg.CanPost && sg.IsChannel, sg.CanManageTopics)}}
	case tg.MemberRestricted:
		perms := chatPermissions(kind)
		for i := range perms {
			if perms[i].key != "@type" {
				perms[i].val = sg.CanPost
			}
		}
		status = object{{"@type", "chatMemberStatusRestricted"}, {"is_member", true}, {"restricted_until_date", 0}, {"permissions", perms}}
	default:
		status = memberStatus("chatMemberStatus" + strings.ToUpper(string(sg.Status[:1])) + string(sg.Status[1:]))
	}
	o := supergroupWithStatus(id, kind, "")
	for i := range o {
		if o[i].key == "status" {
			o[i].val = status
		}
	}
	var active []string
	if sg.Username != "" {
		active = []string{sg.Username}
	}
	return append(o[:2], append(object{{"usernames", object{
		{"@type", "usernames"},
		{"active_usernames", nonNil(active)},
		{"disabled_usernames", []string{}},
		{"editable_username", sg.Username},
	}}}, o[2:]...)...)
}

// administratorRights is a chatAdministratorRights object with the two
// rights stashd reads set as given.
func administratorRights(post, manageTopics bool) object {
	return object{
		{"@type", "chatAdministratorRights"},
		{"can_manage_chat", true}, {"can_change_info", false}, {"can_post_messages", post},
		{"can_edit_messages", false}, {"can_delete_messages", false}, {"can_invite_users", false},
		{"can_restrict_members", false}, {"can_pin_messages", false}, {"can_manage_topics", manageTopics},
		{"can_promote_members", false}, {"can_manage_video_chats", false}, {"can_post_stories", false},
		{"can_edit_stories", false}, {"can_delete_stories", false}, {"is_anonymous", false},
	}
}
