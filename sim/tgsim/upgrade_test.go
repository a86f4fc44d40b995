package tgsim

import (
	"testing"

	"stashd/tg"
)

// Upgrading a basic group makes a new supergroup chat with the same
// members where messages continue from id 1 (after the upgrade's service
// message); the old chat keeps its history, ends with messageChatUpgradeTo,
// and every member's client is told (updateBasicGroup).
func TestUpgradeBasicGroupMovesToNewSupergroup(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.w.AddAccount("bob", false)
	group := f.w.AddChat(tg.KindBasicGroup, "small group", "alice", "bob")
	before := f.w.Post(group, 0, doc("old.zip", 10))
	if err := f.c.OpenChat(f.ctx, group); err != nil {
		t.Fatal(err)
	}

	to := f.w.UpgradeBasicGroup(group)
	up := next(t, f.c, func(u tg.ChatUpgraded) bool { return u.From == group })
	if up.To != to || to == group {
		t.Fatalf("update %+v; want the upgrade to %d", up, to)
	}
	chat, err := f.c.GetChat(f.ctx, to)
	if err != nil {
		t.Fatalf("get the new chat: %v", err)
	}
	if chat.Kind != tg.KindSupergroup || chat.Title != "small group" {
		t.Errorf("new chat %+v; want a supergroup named like the group", chat)
	}

	bob := f.w.Client("bob")
	t.Cleanup(func() { bob.Close() })
	if err := bob.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.GetChat(f.ctx, to); err != nil {
		t.Errorf("another member does not know the new chat: %v", err)
	}

	// The old chat keeps its message and ends with the upgrade.
	old := f.w.Messages(group)
	if len(old) != 2 || old[0].ID != before.ID || old[1].UpgradedTo != to {
		t.Fatalf("old chat history %+v; want the old message then messageChatUpgradeTo", old)
	}
	got, err := f.c.GetMessage(f.ctx, group, old[1].ID)
	if err != nil || got.UpgradedTo != to {
		t.Errorf("get the upgrade message = %+v, %v; want UpgradedTo %d", got, err, to)
	}

	// Messages continue in the new chat, with ids of its own. A supergroup
	// tells its new messages only to sessions that opened it.
	if err := f.c.OpenChat(f.ctx, to); err != nil {
		t.Fatal(err)
	}
	after := f.w.Post(to, 0, doc("new.zip", 10))
	if after.ID.ServerID() != 2 {
		t.Errorf("first post in the new chat has server id %d; want 2 (after messageChatUpgradeFrom)", after.ID.ServerID())
	}
	docs, err := f.c.SearchChatMessages(f.ctx, tg.Search{Chat: to, Limit: 100, Filter: tg.FilterDocument})
	if err != nil || len(docs) != 1 || docs[0].ID != after.ID {
		t.Errorf("documents of the new chat = %+v, %v; want the new post", docs, err)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("posting in the upgraded group did not panic")
		}
	}()
	f.w.Post(group, 0, Post{Text: "too late"})
}

// A member removed from a basic group (the server gives it the group as
// chatForbidden) is no participant the upgrade carries over: it is no
// member of the new supergroup and hears nothing of the upgrade, which
// the group's members alone are told of.
func TestUpgradeLeavesOutAMemberRemovedFromTheGroup(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.w.AddAccount("bob", false)
	group := f.w.AddChat(tg.KindBasicGroup, "small group", "alice", "bob")
	bob := f.w.Client("bob")
	t.Cleanup(func() { bob.Close() })
	for _, c := range []*Client{f.c, bob} {
		if err := c.LoadChats(f.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	f.w.RemoveMember("alice", group, true)
	to := f.w.UpgradeBasicGroup(group)
	if up := next(t, bob, func(u tg.ChatUpgraded) bool { return u.From == group }); up.To != to {
		t.Fatalf("bob told of %+v; want the upgrade to %d", up, to)
	}
	// Updates come in order: alice's told of the upgrade, if at all, before
	// a post made after it.
	mark := f.w.Post(f.chat, 0, Post{Text: "after the upgrade"})
	for _, u := range collectUntil(t, f.c, func(u tg.Update) bool {
		nm, ok := u.(tg.NewMessage)
		return ok && nm.Message.ChatID == f.chat && nm.Message.ID == mark.ID
	}) {
		if up, ok := u.(tg.ChatUpgraded); ok && up.From == group {
			t.Errorf("alice, removed from the group, told of its upgrade: %+v", up)
		}
	}
	first := f.w.Messages(to)[0]
	if _, err := f.c.GetMessage(f.ctx, to, first.ID); err == nil {
		t.Errorf("alice, removed from the group, reads the supergroup it was upgraded to")
	}
	if _, err := bob.GetMessage(f.ctx, to, first.ID); err != nil {
		t.Errorf("bob, a member, cannot read the supergroup: %v", err)
	}
}
