package tdjsonsim_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"stashd/sim/tdjsonsim"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// world is a small world: acct1 in a channel, a forum with one topic and
// a destination channel.
type world struct {
	*tgsim.World
	channel, forum, dest tg.ChatID
	topic                int64
	dir                  string
}

func newWorld(t *testing.T, cfg tgsim.Config) *world {
	t.Helper()
	cfg.FilesDir = t.TempDir()
	w := &world{World: tgsim.NewWorld(cfg), dir: t.TempDir()}
	w.AddAccount("acct1", true)
	w.channel = w.AddChat(tg.KindChannel, "backups", "acct1")
	w.forum = w.AddChat(tg.KindForum, "exchange", "acct1")
	w.topic = w.AddTopic(w.forum, "sources")
	w.dest = w.AddChat(tg.KindChannel, "mirror", "acct1")
	return w
}

func TestLoginAndRequests(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 1})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)

	// A new instance reports TDLib's version and commit, then its first
	// state, before the first answer, as TDLib 1.8.40 does.
	res, before := c.call(1, "getAuthorizationState", nil)
	if len(before) != 3 ||
		before[0].typ() != "updateOption" || before[0].str("name") != "version" ||
		before[0].str("value", "@type") != "optionValueString" || before[0].str("value", "value") != "1.8.40" ||
		before[1].typ() != "updateOption" || before[1].str("name") != "commit_hash" ||
		before[1].str("value", "value") != "22d49d5b87a4d5fc60a194dab02dd1d71529687f" ||
		before[2].typ() != "updateAuthorizationState" ||
		before[2].str("authorization_state", "@type") != "authorizationStateWaitTdlibParameters" {
		t.Fatalf("before the first answer: %v", before)
	}
	if res.typ() != "authorizationStateWaitTdlibParameters" || res.int("@client_id") != 1 {
		t.Fatalf("getAuthorizationState: %v", res)
	}
	if res := c.ok(1, "getMe", nil, "error"); res.int("code") != 401 {
		t.Errorf("getMe before login: %v, want 401", res)
	}
	if res := c.ok(1, "getOption", map[string]any{"name": "version"}, "optionValueString"); res.str("value") != "1.8.40" {
		t.Errorf("version: %v", res)
	}

	c.ok(1, "setTdlibParameters", tdlibParameters(w.dir, "acct1"), "ok")
	if st := c.update(1, "updateAuthorizationState"); st.str("authorization_state", "@type") != "authorizationStateReady" {
		t.Fatalf("after setTdlibParameters: %v", st)
	}
	me := c.ok(1, "getMe", nil, "user")
	if me.get("is_premium") != true {
		t.Errorf("getMe of a Premium account: %v", me)
	}
	if names, _ := me.get("usernames", "active_usernames").([]any); len(names) != 1 || names[0] != "acct1" {
		t.Errorf("getMe usernames: %v", me.get("usernames"))
	}

	// Chats are unknown until loadChats, which answers 404 once all are
	// loaded.
	if res := c.ok(1, "getChat", map[string]any{"chat_id": w.channel}, "error"); res.int("code") != 400 || res.str("message") != "Chat not found" {
		t.Errorf("getChat before loadChats: %v", res)
	}
	loadChats := map[string]any{"chat_list": map[string]any{"@type": "chatListMain"}, "limit": 100}
	c.ok(1, "loadChats", loadChats, "ok")
	if res := c.ok(1, "loadChats", loadChats, "error"); res.int("code") != 404 {
		t.Errorf("second loadChats: %v, want 404", res)
	}

	// An archived chat needs loadChats(chatListArchive) as well.
	w.SetArchived(w.dest, true)
	if res := c.ok(1, "getChat", map[string]any{"chat_id": w.dest}, "error"); res.str("message") != "Chat not found" {
		t.Errorf("getChat of an archived chat with only the main list loaded: %v", res)
	}
	archive := map[string]any{"chat_list": map[string]any{"@type": "chatListArchive"}, "limit": 100}
	c.ok(1, "loadChats", archive, "ok")
	if res := c.ok(1, "loadChats", archive, "error"); res.int("code") != 404 {
		t.Errorf("second loadChats of the archive: %v, want 404", res)
	}
	c.ok(1, "getChat", map[string]any{"chat_id": w.dest}, "chat")
	w.SetArchived(w.dest, false)

	ch := c.ok(1, "getChat", map[string]any{"chat_id": w.channel}, "chat")
	if ch.int("id") != int64(w.channel) || ch.str("type", "@type") != "chatTypeSupergroup" || ch.get("type", "is_channel") != true {
		t.Errorf("channel: %v", ch)
	}
	forum := c.ok(1, "getChat", map[string]any{"chat_id": w.forum}, "chat")
	if forum.get("type", "is_channel") != false {
		t.Errorf("forum chat: %v", forum)
	}
	sg := c.ok(1, "getSupergroup", map[string]any{"supergroup_id": forum.int("type", "supergroup_id")}, "supergroup")
	if sg.get("is_forum") != true {
		t.Errorf("forum's supergroup: %v", sg)
	}
	if res := c.ok(1, "getSupergroup", map[string]any{"supergroup_id": 42}, "error"); res.int("code") != 400 {
		t.Errorf("unknown supergroup: %v", res)
	}

	// A channel's new messages reach only a session that opened it.
	c.ok(1, "openChat", map[string]any{"chat_id": w.channel}, "ok")
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "a.zip", Data: []byte("PK"), Caption: "first"})
	m := c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	if m.int("id") != int64(posted.ID) || m.str("content", "@type") != "messageDocument" ||
		m.str("content", "document", "file_name") != "a.zip" || m.str("content", "caption", "text") != "first" ||
		m.str("content", "document", "document", "remote", "unique_id") != posted.Document.File.UniqueID {
		t.Errorf("getMessage: %v", m)
	}
	ch = c.ok(1, "getChat", map[string]any{"chat_id": w.channel}, "chat")
	if ch.int("last_message", "id") != int64(posted.ID) {
		t.Errorf("last_message after a post: %v", ch.get("last_message"))
	}
	found := c.ok(1, "searchChatMessages", map[string]any{
		"chat_id": w.channel, "query": "", "sender_id": nil, "from_message_id": 0, "offset": 0, "limit": 100,
		"filter": map[string]any{"@type": "searchMessagesFilterDocument"}, "message_thread_id": 0, "saved_messages_topic_id": 0,
	}, "foundChatMessages")
	if msgs, _ := found.get("messages").([]any); len(msgs) != 1 || found.int("next_from_message_id") != int64(posted.ID) {
		t.Errorf("searchChatMessages: %v", found)
	}
	topic := c.ok(1, "getForumTopic", map[string]any{"chat_id": w.forum, "message_thread_id": w.topic}, "forumTopic")
	if topic.str("info", "name") != "sources" || topic.int("info", "message_thread_id") != w.topic {
		t.Errorf("getForumTopic: %v", topic)
	}

	// close: the answer, Closing, Closed, in that order (TDLib 1.8.40
	// answers close first), then silence.
	extra := c.send(1, "close", nil)
	var order []string
	for len(order) < 3 {
		o := c.next()
		switch {
		case o.typ() == "updateAuthorizationState":
			order = append(order, o.str("authorization_state", "@type"))
		case o["@extra"] == extra:
			order = append(order, "answer:"+o.typ())
		}
	}
	if want := []string{"answer:ok", "authorizationStateClosing", "authorizationStateClosed"}; strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("close: %v, want %v", order, want)
	}
	c.send(1, "getMe", nil)
	c.send(2, "getAuthorizationState", nil)
	if o := c.next(); o.int("@client_id") != 2 {
		t.Errorf("after Closed, client 1 was answered: %v", o)
	}

	// Every request went through the simulator, which counted it.
	calls := w.Calls("acct1")
	for method, want := range map[string]int{tg.MethodLoadChats: 4, tg.MethodGetChat: 6, tg.MethodGetMe: 1, tg.MethodGetMessage: 1} {
		if calls[method] != want {
			t.Errorf("tgsim counted %d %s, want %d (all: %v)", calls[method], method, want, calls)
		}
	}
}

func TestErrorsAsTDLibWritesThem(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 2})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)

	noAPI := tdlibParameters(w.dir, "acct1")
	noAPI["api_id"] = 0
	if res := c.ok(1, "setTdlibParameters", noAPI, "error"); res.int("code") != 400 || !strings.Contains(res.str("message"), "api_id") {
		t.Errorf("setTdlibParameters without api_id: %v", res)
	}
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")

	w.InjectFloodWait("acct1", tg.MethodGetMe, 3*time.Second, 1)
	for _, tc := range []struct {
		name      string
		method    string
		params    map[string]any
		code      int64
		message   string
		malformed bool
	}{
		{"flood wait", "getMe", nil, 429, "Too Many Requests: retry after 3", false},
		{"message not found", "getMessage", map[string]any{"chat_id": w.channel, "message_id": tg.MessageIDFromServer(999)}, 404, "Not Found", false},
		{"nothing before the date", "getChatMessageByDate", map[string]any{"chat_id": w.channel, "date": 1}, 404, "Not Found", false},
		{"unknown chat", "openChat", map[string]any{"chat_id": -1001999999999}, 400, "Chat not found", false},
		{"not a forum", "getForumTopic", map[string]any{"chat_id": w.channel, "message_thread_id": 1 << 20}, 400, "Chat is not a forum", false},
		{"not simulated", "getStickers", nil, 400, "tdjsonsim: getStickers is not simulated", false},
		{"bad parameters", "getChat", map[string]any{"chat_id": "x"}, 400, "", true},
		{"bad priority", "downloadFile", map[string]any{"file_id": 1, "priority": 0}, 400, "Priority must be between 1 and 32", false},
	} {
		var res tdObject
		if tc.malformed {
			res = c.malformed(1, tc.method, tc.params)
		} else {
			res = c.ok(1, tc.method, tc.params, "error")
		}
		if res.int("code") != tc.code || tc.message != "" && res.str("message") != tc.message {
			t.Errorf("%s: %v, want %d %q", tc.name, res, tc.code, tc.message)
		}
	}
	w.SetPrivate(w.channel, true)
	if res := c.ok(1, "getChat", map[string]any{"chat_id": w.channel}, "error"); res.int("code") != 400 || res.str("message") != "CHANNEL_PRIVATE" {
		t.Errorf("private channel: %v", res)
	}
}

func TestUnknownAccountIsNotLoggedIn(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 3})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.ok(1, "setTdlibParameters", tdlibParameters(w.dir, "nobody"), "ok")
	if st := c.update(1, "updateAuthorizationState"); st.str("authorization_state", "@type") != "authorizationStateWaitPhoneNumber" {
		t.Fatalf("unknown account: %v", st)
	}
	res := c.ok(1, "setAuthenticationPhoneNumber", map[string]any{"phone_number": "+1555"}, "error")
	if res.int("code") != 400 || !strings.Contains(res.str("message"), `"nobody" does not exist`) {
		t.Errorf("phone number for an unknown account: %v", res)
	}
	if res := c.ok(1, "getMe", nil, "error"); res.int("code") != 401 {
		t.Errorf("getMe while not logged in: %v", res)
	}
}

func TestUpdatesAsTDLibSpellsThem(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 4})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	// The instance reported TDLib's version when it started: the
	// simulated client's own report of it is not repeated.
	if o, before := c.until("updateConnectionState", func(o tdObject) bool { return o.typ() == "updateConnectionState" }); o.str("state", "@type") != "connectionStateReady" || len(before) != 0 {
		t.Errorf("after login: %v, then connection state %v", before, o)
	}
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	for _, chat := range []tg.ChatID{w.channel, w.forum} {
		c.ok(1, "openChat", map[string]any{"chat_id": chat}, "ok")
	}

	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "b.tar", Data: []byte("0123456789"), AlbumID: 77})
	nm := c.update(1, "updateNewMessage")
	msg := nm.obj("message")
	if msg.int("id") != int64(posted.ID) || msg.int("chat_id") != int64(w.channel) || msg.str("media_album_id") != "77" ||
		msg.str("content", "document", "file_name") != "b.tar" || msg.int("content", "document", "document", "size") != 10 {
		t.Errorf("updateNewMessage: %v", nm)
	}
	if lm := c.update(1, "updateChatLastMessage"); lm.int("last_message", "id") != int64(posted.ID) {
		t.Errorf("updateChatLastMessage: %v", lm)
	}

	// An asynchronous download: the answer, and updateFile until done (a
	// small file may be done before the answer is read).
	fileID := msg.int("content", "document", "document", "id")
	extra := c.send(1, "downloadFile", map[string]any{"file_id": fileID, "priority": 1, "offset": 0, "limit": 0, "synchronous": false})
	var answer, done tdObject
	for answer == nil || done == nil {
		switch o := c.next(); {
		case o == nil:
			t.Fatal("connection ended during the download")
		case o["@extra"] == extra:
			answer = o
		case o.typ() == "updateFile" && o.get("file", "local", "is_downloading_completed") == true:
			done = o
		}
	}
	if answer.typ() != "file" || answer.int("id") != fileID {
		t.Errorf("downloadFile: %v", answer)
	}
	if done.str("file", "local", "path") == "" || done.int("file", "local", "downloaded_size") != 10 {
		t.Errorf("completed download: %v", done)
	}

	// A send: a temporary message, then updateMessageSendSucceeded.
	remote := msg.str("content", "document", "document", "remote", "id")
	tmp := c.ok(1, "sendMessage", map[string]any{
		"chat_id": w.dest, "message_thread_id": 0, "reply_to": nil, "options": nil, "reply_markup": nil,
		"input_message_content": map[string]any{
			"@type":    "inputMessageDocument",
			"document": map[string]any{"@type": "inputFileRemote", "id": remote},
			"caption":  map[string]any{"@type": "formattedText", "text": "token-1", "entities": []any{}},
		},
	}, "message")
	if tg.MessageID(tmp.int("id")).IsServer() || tmp.str("sending_state", "@type") != "messageSendingStatePending" || tmp.get("is_outgoing") != true {
		t.Errorf("sendMessage answer: %v", tmp)
	}
	sent, _ := c.until("send outcome", func(o tdObject) bool { return o.typ() == "updateMessageSendSucceeded" })
	if sent.int("old_message_id") != tmp.int("id") || !tg.MessageID(sent.int("message", "id")).IsServer() ||
		sent.str("message", "content", "caption", "text") != "token-1" {
		t.Errorf("updateMessageSendSucceeded: %v (temporary %v)", sent, tmp.int("id"))
	}

	thread := w.AddTopic(w.forum, "new topic")
	ti, _ := c.until("topic info", func(o tdObject) bool { return o.typ() == "updateForumTopicInfo" })
	if ti.int("chat_id") != int64(w.forum) || ti.int("info", "message_thread_id") != thread || ti.str("info", "name") != "new topic" {
		t.Errorf("updateForumTopicInfo: %v", ti)
	}

	text := w.Post(w.channel, 0, tgsim.Post{Text: "soon"})
	w.EditIntoDocument(w.channel, text.ID, tgsim.Post{FileName: "c.7z", Data: []byte("7z")})
	mc, _ := c.until("content change", func(o tdObject) bool { return o.typ() == "updateMessageContent" })
	if mc.int("chat_id") != int64(w.channel) || mc.int("message_id") != int64(text.ID) {
		t.Errorf("updateMessageContent: %v", mc)
	}

	w.Disconnect("acct1", 0)
	if cs, _ := c.until("disconnect", func(o tdObject) bool { return o.typ() == "updateConnectionState" }); cs.str("state", "@type") != "connectionStateConnecting" {
		t.Errorf("disconnect: %v", cs)
	}
}

func TestSendFailedCarriesTheMessage(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 5, SendFailRate: 1})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "d.zip", Data: []byte("PK")})
	m := c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	tmp := c.ok(1, "sendMessage", map[string]any{
		"chat_id": w.dest,
		"input_message_content": map[string]any{
			"@type":    "inputMessageDocument",
			"document": map[string]any{"@type": "inputFileRemote", "id": m.str("content", "document", "document", "remote", "id")},
		},
	}, "message")
	failed, _ := c.until("send outcome", func(o tdObject) bool { return o.typ() == "updateMessageSendFailed" })
	if failed.int("old_message_id") != tmp.int("id") || failed.int("message", "chat_id") != int64(w.dest) ||
		failed.int("error", "code") != 500 || failed.str("error", "message") != "RPC_CALL_FAIL" ||
		failed.str("message", "sending_state", "@type") != "messageSendingStateFailed" {
		t.Errorf("updateMessageSendFailed: %v", failed)
	}
	if failed.str("message", "content", "document", "file_name") != "d.zip" {
		t.Errorf("the failed message lost its document: %v", failed.get("message", "content"))
	}
}

// A send into a channel made private on the server alone goes on the wire
// as TDLib sends it: the temporary message, then updateSupergroup with the
// status left (TDLib emulates leaving on CHANNEL_PRIVATE) and
// updateMessageSendFailed with 400 CHANNEL_PRIVATE, both after the send's
// answer; the next send is TDLib's own refusal.
func TestSendIntoAChannelMadePrivate(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 5})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "d.zip", Data: []byte("PK")})
	m := c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	send := map[string]any{
		"chat_id": w.dest,
		"input_message_content": map[string]any{
			"@type":    "inputMessageDocument",
			"document": map[string]any{"@type": "inputFileRemote", "id": m.str("content", "document", "document", "remote", "id")},
		},
	}
	w.SetPrivate(w.dest, true)
	isLeft := func(o tdObject) bool {
		return o.typ() == "updateSupergroup" && o.str("supergroup", "status", "@type") == "chatMemberStatusLeft"
	}
	tmp, before := c.call(1, "sendMessage", send)
	if tmp.typ() != "message" || slices.ContainsFunc(before, isLeft) {
		t.Fatalf("sendMessage answered %v after %v; want the temporary message, before the server's refusal", tmp, before)
	}
	left, _ := c.until("the status left", isLeft)
	failed, _ := c.until("send outcome", func(o tdObject) bool { return o.typ() == "updateMessageSendFailed" })
	if left.int("supergroup", "id") != -1_000_000_000_000-int64(w.dest) { // the chat's supergroup
		t.Errorf("updateSupergroup for another chat: %v", left)
	}
	if failed.int("old_message_id") != tmp.int("id") || failed.int("error", "code") != 400 || failed.str("error", "message") != "CHANNEL_PRIVATE" {
		t.Errorf("updateMessageSendFailed: %v; want 400 CHANNEL_PRIVATE for message %d", failed, tmp.int("id"))
	}
	if res := c.ok(1, "sendMessage", send, "error"); res.int("code") != 400 || res.str("message") != "Have no write access to the chat" {
		t.Errorf("next send: %v; want TDLib's own 400 Have no write access to the chat", res)
	}
}

// Server.Close closes every instance as TDLib closes, then the connection.
func TestCloseClosesClientsAsTDLib(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 6})
	srv, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	// A second instance of the account needs a directory of its own: TDLib
	// locks its database.
	c.login(2, t.TempDir(), "acct1")
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		srv.Close()
	}()
	states := map[int64][]string{}
	for o := c.next(); o != nil; o = c.next() {
		if o.typ() == "updateAuthorizationState" {
			id := o.int("@client_id")
			states[id] = append(states[id], o.str("authorization_state", "@type"))
		}
	}
	<-closed
	for _, id := range []int64{1, 2} {
		if got := strings.Join(states[id], " "); got != "authorizationStateClosing authorizationStateClosed" {
			t.Errorf("client %d saw %q, want Closing then Closed", id, got)
		}
	}
}

// searchPublicChat resolves a public @username to its chat, member or not,
// as TDLib does; the supergroup of the chat it showed can then be asked
// for, as after getChat.
func TestSearchPublicChat(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 9})
	w.SetUsername(w.forum, "exchange_pub")
	other := w.AddChat(tg.KindChannel, "elsewhere") // acct1 is no member
	w.SetUsername(other, "elsewhere_pub")
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")

	forum := c.ok(1, "searchPublicChat", map[string]any{"username": "exchange_pub"}, "chat")
	if forum.int("id") != int64(w.forum) || forum.str("title") != "exchange" || forum.get("type", "is_channel") != false {
		t.Errorf("searchPublicChat of the forum: %v", forum)
	}
	sg := c.ok(1, "getSupergroup", map[string]any{"supergroup_id": forum.int("type", "supergroup_id")}, "supergroup")
	if sg.get("is_forum") != true {
		t.Errorf("the forum's supergroup: %v", sg)
	}
	if ch := c.ok(1, "searchPublicChat", map[string]any{"username": "elsewhere_pub"}, "chat"); ch.int("id") != int64(other) {
		t.Errorf("searchPublicChat of a channel the account is not in: %v", ch)
	}
	if res := c.ok(1, "searchPublicChat", map[string]any{"username": "nobody_here"}, "error"); res.int("code") != 400 || res.str("message") != "Chat not found" {
		t.Errorf("unknown username: %v, want 400 Chat not found", res)
	}
	w.SetPrivate(other, true)
	if res := c.ok(1, "searchPublicChat", map[string]any{"username": "elsewhere_pub"}, "error"); res.int("code") != 400 || res.str("message") != "CHANNEL_PRIVATE" {
		t.Errorf("private channel: %v, want 400 CHANNEL_PRIVATE", res)
	}
	if n := w.Calls("acct1")[tg.MethodSearchPublicChat]; n != 4 {
		t.Errorf("tgsim counted %d searchPublicChat, want 4", n)
	}
}

// A basic group upgraded to a supergroup reaches a client as TDLib says it:
// messageChatUpgradeTo in the old chat (opened), then updateBasicGroup with
// upgraded_to_supergroup_id; the new chat answers getChat as a supergroup.
func TestBasicGroupUpgradeOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 4})
	group := w.AddChat(tg.KindBasicGroup, "small group", "acct1")
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	c.ok(1, "openChat", map[string]any{"chat_id": group}, "ok")

	to := w.UpgradeBasicGroup(group)
	nm, _ := c.until("messageChatUpgradeTo", func(o tdObject) bool {
		return o.typ() == "updateNewMessage" && o.int("message", "chat_id") == int64(group)
	})
	if nm.str("message", "content", "@type") != "messageChatUpgradeTo" ||
		nm.int("message", "content", "supergroup_id") != -1_000_000_000_000-int64(to) {
		t.Errorf("upgrade message: %v", nm)
	}
	bg, _ := c.until("updateBasicGroup", func(o tdObject) bool { return o.typ() == "updateBasicGroup" })
	if bg.int("basic_group", "id") != -int64(group) || bg.int("basic_group", "upgraded_to_supergroup_id") != -1_000_000_000_000-int64(to) {
		t.Errorf("updateBasicGroup: %v", bg)
	}
	chat := c.ok(1, "getChat", map[string]any{"chat_id": to}, "chat")
	if chat.str("type", "@type") != "chatTypeSupergroup" || chat.int("type", "supergroup_id") != -1_000_000_000_000-int64(to) {
		t.Errorf("getChat of the new supergroup: %v", chat)
	}
}

// TDLib locks an instance's database directory: a second instance on it,
// from another process, waits and then fails with TDLib's error; once the
// first process is gone (its lock goes with it) the directory opens.
func TestDatabaseDirectoryIsLocked(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 9})
	_, path := startServerConfig(t, w.World, tdjsonsim.Config{LockWait: 100 * time.Millisecond})
	first := dialWire(t, path)
	first.login(1, w.dir, "acct1")

	second := dialWire(t, path)
	res, _ := second.call(1, "setTdlibParameters", tdlibParameters(w.dir, "acct1"))
	if res.typ() != "error" || res.int("code") != 400 ||
		!strings.HasPrefix(res.str("message"), "Can't lock file") || !strings.Contains(res.str("message"), "already in use") {
		t.Fatalf("a second instance on a locked directory: got %v, want TDLib's 400 Can't lock file", res)
	}

	first.conn.Close() // the first process dies
	second.ok(1, "setTdlibParameters", tdlibParameters(w.dir, "acct1"), "ok")
	if st := second.update(1, "updateAuthorizationState"); st.str("authorization_state", "@type") != "authorizationStateReady" {
		t.Errorf("after the first process is gone: %v", st)
	}
}

// createForumTopic answers with the new topic's forumTopicInfo (400 on a
// chat that is not a forum), and sendMessage with message_thread_id lands
// the document in that topic; an unknown thread fails with 400.
func TestCreateForumTopicAndSendIntoIt(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 7})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	icon := map[string]any{"@type": "forumTopicIcon", "color": 0x6FB9F0, "custom_emoji_id": "0"}
	if res := c.ok(1, "createForumTopic", map[string]any{"chat_id": w.dest, "name": "Dragons", "icon": icon}, "error"); res.int("code") != 400 || res.str("message") != "The chat is not a forum" {
		t.Errorf("createForumTopic on a channel: %v", res)
	}
	info := c.ok(1, "createForumTopic", map[string]any{"chat_id": w.forum, "name": "Dragons", "icon": icon}, "forumTopicInfo")
	thread := info.int("message_thread_id")
	if info.str("name") != "Dragons" || !tg.MessageID(thread).IsServer() || info.get("is_outgoing") != true {
		t.Errorf("createForumTopic: %v", info)
	}
	if got := w.Topics(w.forum)[thread]; got != "Dragons" {
		t.Errorf("the forum's topic %d is %q, want Dragons", thread, got)
	}

	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "d.zip", Data: []byte("PK")})
	m := c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	send := func(thread int64, want string) tdObject {
		return c.ok(1, "sendMessage", map[string]any{
			"chat_id": w.forum, "message_thread_id": thread, "reply_to": nil, "options": nil, "reply_markup": nil,
			"input_message_content": map[string]any{
				"@type":    "inputMessageDocument",
				"document": map[string]any{"@type": "inputFileRemote", "id": m.str("content", "document", "document", "remote", "id")},
				"caption":  map[string]any{"@type": "formattedText", "text": "token-2", "entities": []any{}},
			},
		}, want)
	}
	if res := send(thread+1<<20*100, "error"); res.int("code") != 400 || res.str("message") != "Invalid message thread ID specified" {
		t.Errorf("sendMessage into an unknown thread: %v", res)
	}
	tmp := send(thread, "message")
	sent, _ := c.until("send outcome", func(o tdObject) bool { return o.typ() == "updateMessageSendSucceeded" })
	if sent.int("old_message_id") != tmp.int("id") || sent.int("message", "message_thread_id") != thread ||
		sent.get("message", "is_topic_message") != true {
		t.Errorf("updateMessageSendSucceeded: %v, want a message in topic %d", sent, thread)
	}
	found := c.ok(1, "getForumTopics", map[string]any{"chat_id": w.forum, "query": "dragons", "offset_date": 0,
		"offset_message_id": 0, "offset_message_thread_id": 0, "limit": 100}, "forumTopics")
	topics, _ := found.get("topics").([]any)
	var first tdObject
	if len(topics) == 1 {
		first, _ = topics[0].(map[string]any)
	}
	if first.str("info", "name") != "Dragons" || first.int("info", "message_thread_id") != thread {
		t.Errorf("getForumTopics: %v, want the Dragons topic", found)
	}
	if got := w.Calls("acct1")[tg.MethodCreateForumTopic]; got != 2 {
		t.Errorf("createForumTopic counted %d times, want 2", got)
	}
}

// getForumTopics pages as TDLib 1.8.40 does: each page's next offsets are
// its last topic's (last message date and id, thread), the request that
// sends them back gets the following topics, and after the last topic an
// empty page with zero offsets; total_count counts every matching topic,
// and a limit above the server's 100 gets 100.
func TestGetForumTopicsPages(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 7})
	want := map[int64]bool{}
	for i := range 130 {
		want[w.AddTopic(w.forum, fmt.Sprintf("Dragons %d", i))] = true
	}
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	offset := map[string]any{"offset_date": 0, "offset_message_id": 0, "offset_message_thread_id": 0}
	var sizes []int
	for range 4 {
		page := c.ok(1, "getForumTopics", map[string]any{"chat_id": w.forum, "query": "dragons", "limit": 150,
			"offset_date": offset["offset_date"], "offset_message_id": offset["offset_message_id"],
			"offset_message_thread_id": offset["offset_message_thread_id"]}, "forumTopics")
		topics, _ := page.get("topics").([]any)
		sizes = append(sizes, len(topics))
		if page.int("total_count") != 130 {
			t.Errorf("total_count %d, want 130", page.int("total_count"))
		}
		next := map[string]any{"offset_date": page.int("next_offset_date"), "offset_message_id": page.int("next_offset_message_id"),
			"offset_message_thread_id": page.int("next_offset_message_thread_id")}
		if len(topics) == 0 {
			if next["offset_date"] != int64(0) || next["offset_message_id"] != int64(0) || next["offset_message_thread_id"] != int64(0) {
				t.Errorf("an empty page's next offsets are %v, want zero", next)
			}
			break
		}
		last := tdObject(topics[len(topics)-1].(map[string]any))
		if next["offset_message_thread_id"] != last.int("info", "message_thread_id") || next["offset_message_id"] != last.int("last_message", "id") ||
			next["offset_date"] == int64(0) {
			t.Errorf("next offsets %v, want those of the last topic %v", next, last)
		}
		for _, o := range topics {
			thread := tdObject(o.(map[string]any)).int("info", "message_thread_id")
			if !want[thread] {
				t.Errorf("topic %d listed twice, or not one of the Dragons", thread)
			}
			delete(want, thread)
		}
		offset = next
	}
	if len(sizes) != 3 || sizes[0] != 100 || sizes[1] != 30 || len(want) != 0 {
		t.Errorf("pages of %v topics, %d never listed; want 100, 30, then an empty page", sizes, len(want))
	}
	if res := c.ok(1, "getForumTopics", map[string]any{"chat_id": w.forum, "query": "", "limit": 0, "offset_date": 0,
		"offset_message_id": 0, "offset_message_thread_id": 0}, "error"); res.int("code") != 400 || res.str("message") != "Invalid limit specified" {
		t.Errorf("getForumTopics with limit 0: %v", res)
	}
}

// TDLib reports the account's status in each supergroup it loads, and its
// change: updateSupergroup with the status member at loadChats, left once
// the account is removed, member again once it is back. A basic group's
// comes in updateBasicGroup, the group active, the account removed shown
// banned; once the group is upgraded its status says banned too, the group
// inactive and naming the supergroup.
func TestMembershipOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 5})
	group := w.AddChat(tg.KindBasicGroup, "club", "acct1")
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	status := func(want string) func(tdObject) bool {
		return func(o tdObject) bool {
			return o.typ() == "updateSupergroup" && o.int("supergroup", "id") == -1_000_000_000_000-int64(w.channel) &&
				o.str("supergroup", "status", "@type") == want
		}
	}
	groupStatus := func(want string, active bool, upgradedTo tg.ChatID) func(tdObject) bool {
		return func(o tdObject) bool {
			if o.typ() != "updateBasicGroup" || o.int("basic_group", "id") != -int64(group) {
				return false
			}
			if o.str("basic_group", "status", "@type") != want || o.get("basic_group", "is_active") != active {
				t.Fatalf("basic group %v, want the status %s, active %v", o, want, active)
			}
			if up := o.int("basic_group", "upgraded_to_supergroup_id"); up != 0 && up != -1_000_000_000_000-int64(upgradedTo) ||
				(up == 0) != (upgradedTo == 0) {
				t.Fatalf("basic group %v, want it upgraded to chat %d", o, upgradedTo)
			}
			return true
		}
	}
	// The load's reports are updates: they may come before its answer or
	// after it, and in either order.
	res, before := c.call(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100})
	if res.typ() != "ok" {
		t.Fatalf("loadChats: got %v, want ok", res)
	}
	memberAtLoad, groupAtLoad := status("chatMemberStatusMember"), groupStatus("chatMemberStatusMember", true, 0)
	var sawMember, sawGroup bool
	note := func(o tdObject) bool {
		sawMember = sawMember || memberAtLoad(o)
		sawGroup = sawGroup || groupAtLoad(o)
		return sawMember && sawGroup
	}
	done := false
	for _, o := range before {
		done = note(o)
	}
	if !done {
		c.until("the supergroup's and the group's status member at load", note)
	}
	w.RemoveMember("acct1", w.channel, true)
	c.until("the status left", status("chatMemberStatusLeft"))
	w.RemoveMember("acct1", w.channel, false)
	c.until("the status member again", status("chatMemberStatusMember"))
	w.RemoveMember("acct1", group, true)
	c.until("the group's status banned", groupStatus("chatMemberStatusBanned", true, 0))
	w.RemoveMember("acct1", group, false)
	c.until("the group's status member again", groupStatus("chatMemberStatusMember", true, 0))
	sg := w.UpgradeBasicGroup(group)
	c.until("the group upgraded", groupStatus("chatMemberStatusBanned", false, sg))
}
