package tdlib

import (
	"testing"

	"stashd/tg"
)

func TestDecodeSupergroupRights(t *testing.T) {
	member := tdPermissions{CanSendDocuments: true}
	for _, c := range []struct {
		name, json string
		perms      tdPermissions
		want       tg.Supergroup
	}{
		{"channel admin who posts", `{"@type":"supergroup","usernames":{"@type":"usernames","active_usernames":["mirror"]},"is_channel":true,
			"status":{"@type":"chatMemberStatusAdministrator","rights":{"@type":"chatAdministratorRights","can_post_messages":true}}}`, member,
			tg.Supergroup{Username: "mirror", IsChannel: true, Status: tg.MemberAdministrator, CanPost: true}},
		{"channel admin who may not post", `{"@type":"supergroup","is_channel":true,
			"status":{"@type":"chatMemberStatusAdministrator","rights":{"@type":"chatAdministratorRights","can_post_messages":false}}}`, member,
			tg.Supergroup{IsChannel: true, Status: tg.MemberAdministrator}},
		{"channel member", `{"@type":"supergroup","is_channel":true,"status":{"@type":"chatMemberStatusMember"}}`, member,
			tg.Supergroup{IsChannel: true, Status: tg.MemberMember}},
		{"group member", `{"@type":"supergroup","status":{"@type":"chatMemberStatusMember"}}`, member,
			tg.Supergroup{Status: tg.MemberMember, CanPost: true}},
		{"group member without documents", `{"@type":"supergroup","status":{"@type":"chatMemberStatusMember"}}`, tdPermissions{},
			tg.Supergroup{Status: tg.MemberMember}},
		{"forum admin with topics", `{"@type":"supergroup","is_forum":true,
			"status":{"@type":"chatMemberStatusAdministrator","rights":{"@type":"chatAdministratorRights","can_manage_topics":true}}}`, member,
			tg.Supergroup{IsForum: true, Status: tg.MemberAdministrator, CanPost: true, CanManageTopics: true}},
		{"creator", `{"@type":"supergroup","is_forum":true,"status":{"@type":"chatMemberStatusCreator","is_member":true}}`, member,
			tg.Supergroup{IsForum: true, Status: tg.MemberCreator, CanPost: true, CanManageTopics: true}},
		{"restricted member", `{"@type":"supergroup","status":{"@type":"chatMemberStatusRestricted","is_member":true,
			"permissions":{"@type":"chatPermissions","can_send_documents":false}}}`, member,
			tg.Supergroup{Status: tg.MemberRestricted}},
		{"restricted, not a member", `{"@type":"supergroup","status":{"@type":"chatMemberStatusRestricted","is_member":false}}`, member,
			tg.Supergroup{Status: tg.MemberLeft}},
		{"left", `{"@type":"supergroup","status":{"@type":"chatMemberStatusLeft"}}`, member, tg.Supergroup{Status: tg.MemberLeft}},
		{"banned", `{"@type":"supergroup","status":{"@type":"chatMemberStatusBanned"}}`, member, tg.Supergroup{Status: tg.MemberBanned}},
	} {
		got, err := decodeSupergroup([]byte(c.json), c.perms)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	if _, err := decodeSupergroup([]byte(`{"@type":"supergroup","status":{"@type":"chatMemberStatusNew"}}`), member); err == nil {
		t.Error("an unknown status decoded")
	}
	ids, err := decodeChats([]byte(`{"@type":"chats","total_count":2,"chat_ids":[-1001000000001,5000000002]}`))
	if err != nil || len(ids) != 2 || ids[0] != -1001000000001 || ids[1] != 5000000002 {
		t.Errorf("chats: %v, %v", ids, err)
	}
	if r := getChatsRequest(true, 50); r.Method != "getChats" || r.Params["chat_list"].(map[string]any)["@type"] != "chatListArchive" || r.Params["limit"] != 50 {
		t.Errorf("getChats request: %+v", r)
	}
	if supergroupOfChat(-1001234567890) != 1234567890 || supergroupOfChat(-4000000001) != 0 {
		t.Error("supergroupOfChat")
	}
}
