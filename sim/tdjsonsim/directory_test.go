package tdjsonsim_test

import (
	"encoding/json"
	"testing"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// getChats lists each chat list; getSupergroup carries the account's
// status with its rights and the public username, as TDLib writes them.
func TestGetChatsAndSupergroupStatus(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 1})
	w.SetUsername(w.dest, "my_mirror")
	readers := w.AddChat(tg.KindSupergroup, "readers", "acct1")
	w.SetWriteAccess("acct1", readers, false)
	w.SetArchived(w.channel, true)
	w.LoseAccess(w.forum, true)
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.ok(1, "setTdlibParameters", tdlibParameters(w.dir, "acct1"), "ok")
	c.update(1, "updateAuthorizationState")

	ids := func(list string) []int64 {
		res := c.ok(1, "getChats", map[string]any{"chat_list": map[string]any{"@type": list}, "limit": 100}, "chats")
		raw, _ := res.get("chat_ids").([]any)
		var out []int64
		for _, v := range raw {
			n, _ := v.(json.Number).Int64()
			out = append(out, n)
		}
		if res.int("total_count") != int64(len(out)) {
			t.Errorf("%s: total_count %d for %d ids", list, res.int("total_count"), len(out))
		}
		return out
	}
	if got := ids("chatListArchive"); len(got) != 1 || got[0] != int64(w.channel) {
		t.Errorf("archive list: %v, want [%d]", got, w.channel)
	}
	if got := ids("chatListMain"); len(got) != 3 {
		t.Errorf("main list: %v, want the forum, the destination and readers", got)
	}

	status := func(chat tg.ChatID) tdObject {
		ch := c.ok(1, "getChat", map[string]any{"chat_id": chat}, "chat")
		sg := c.ok(1, "getSupergroup", map[string]any{"supergroup_id": ch.int("type", "supergroup_id")}, "supergroup")
		return sg
	}
	dest := status(w.dest)
	if dest.str("status", "@type") != "chatMemberStatusAdministrator" || dest.get("status", "rights", "can_post_messages") != true {
		t.Errorf("destination channel: %v", dest.get("status"))
	}
	if names, _ := dest.get("usernames", "active_usernames").([]any); len(names) != 1 || names[0] != "my_mirror" {
		t.Errorf("destination usernames: %v", dest.get("usernames"))
	}
	if r := status(readers); r.str("status", "@type") != "chatMemberStatusRestricted" || r.get("status", "is_member") != true ||
		r.get("status", "permissions", "can_send_documents") != false {
		t.Errorf("read-only supergroup: %v", r.get("status"))
	}
	if f := status(w.forum); f.str("status", "@type") != "chatMemberStatusLeft" {
		t.Errorf("lost forum: %v", f.get("status"))
	}
}

// addProxy as TDLib answers it; through the proxy the blocked account
// connects, and the client sees connectingToProxy then ready.
func TestAddProxyOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 1})
	w.RequireProxy("acct1", "px.example")
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.ok(1, "setTdlibParameters", tdlibParameters(w.dir, "acct1"), "ok")
	c.update(1, "updateAuthorizationState")
	if st := c.update(1, "updateConnectionState"); st.str("state", "@type") != "connectionStateConnecting" {
		t.Fatalf("blocked account: %v", st)
	}
	res, before := c.call(1, "addProxy", map[string]any{"server": "px.example", "port": 1080, "enable": true,
		"type": map[string]any{"@type": "proxyTypeSocks5", "username": "u", "password": "p"}})
	if res.typ() != "proxy" || res.str("server") != "px.example" || res.get("is_enabled") != true || res.str("type", "@type") != "proxyTypeSocks5" {
		t.Errorf("addProxy: %v", res)
	}
	// The state updates the proxy brings may come before the answer or
	// after it, as TDLib's do.
	var states []string
	for _, o := range before {
		if o.typ() == "updateConnectionState" && o.int("@client_id") == 1 {
			states = append(states, o.str("state", "@type"))
		}
	}
	for len(states) < 2 {
		states = append(states, c.update(1, "updateConnectionState").str("state", "@type"))
	}
	if states[0] != "connectionStateConnectingToProxy" || states[1] != "connectionStateReady" {
		t.Errorf("connection states after addProxy: %v, want connectingToProxy then ready", states)
	}
	if n := w.Calls("acct1")[tgsim.MethodAddProxy]; n != 1 {
		t.Errorf("addProxy counted %d times", n)
	}
}
