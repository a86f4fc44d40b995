package tgsim

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"stashd/tg"
)

func TestChatsUnknownBeforeLoadChats(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{})
	w.AddAccount("alice", false)
	w.AddAccount("bob", false)
	chat := w.AddChat(tg.KindChannel, "news", "alice")
	c := w.Client("alice")
	defer c.Close()
	ctx := t.Context()

	checks := map[string]func() error{
		"getChat":  func() error { _, err := c.GetChat(ctx, chat); return err },
		"openChat": func() error { return c.OpenChat(ctx, chat) },
		"search": func() error {
			_, err := c.SearchChatMessages(ctx, tg.Search{Chat: chat, Limit: 10})
			return err
		},
		"getMessage":   func() error { _, err := c.GetMessage(ctx, chat, tg.MessageIDFromServer(1)); return err },
		"messageByDay": func() error { _, err := c.GetChatMessageByDate(ctx, chat, time.Now()); return err },
		"forumTopic":   func() error { _, err := c.GetForumTopic(ctx, chat, 1<<20); return err },
	}
	for name, check := range checks {
		err := check()
		var te *tg.Error
		if !errors.Is(err, tg.ErrChatNotFound) || !errors.As(err, &te) || te.Code != 400 || te.Message != "Chat not found" {
			t.Errorf("%s before loadChats: got %v, want 400 Chat not found wrapping ErrChatNotFound", name, err)
		}
	}

	if err := c.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetChat(ctx, chat)
	if err != nil || got.ID != chat || got.Kind != tg.KindChannel || got.Title != "news" {
		t.Fatalf("getChat after loadChats = %+v, %v", got, err)
	}

	// A chat the account is not a member of stays unknown.
	bc := w.Client("bob")
	defer bc.Close()
	if err := bc.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := bc.GetChat(ctx, chat); !errors.Is(err, tg.ErrChatNotFound) {
		t.Fatalf("getChat by non-member: %v, want ErrChatNotFound", err)
	}
}

func TestChannelIDsAndServerIDs(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{})
	w.AddAccount("alice", false)
	ch := w.AddChat(tg.KindChannel, "a", "alice")
	forum := w.AddChat(tg.KindForum, "f", "alice")
	if s := strconv.FormatInt(int64(ch), 10); !strings.HasPrefix(s, "-100") || len(s) != 14 {
		t.Errorf("channel id %d is not of the form -100xxxxxxxxxx", ch)
	}

	// Every kind of message takes the next server id: text, documents, a
	// topic's creation message, messages in topics.
	var ids []tg.MessageID
	ids = append(ids, w.Post(forum, 0, Post{Text: "hi"}).ID)
	thread := w.AddTopic(forum, "t")
	ids = append(ids, tg.MessageID(thread))
	ids = append(ids, w.Post(forum, thread, doc("a.zip", 10)).ID)
	ids = append(ids, w.Post(forum, 0, doc("b.zip", 10)).ID)
	for i, id := range ids {
		if id.ServerID() != int64(i+1) || id != tg.MessageIDFromServer(int64(i+1)) {
			t.Fatalf("message %d has id %d (server %d), want server id %d", i, id, id.ServerID(), i+1)
		}
	}
	// A deletion leaves a hole; ids go on.
	w.Delete(forum, ids[3])
	if id := w.Post(forum, 0, Post{Text: "x"}).ID; id.ServerID() != 5 {
		t.Fatalf("after deleting server id 4 the next id is server %d, want 5", id.ServerID())
	}
	// Sequences are per chat.
	if id := w.Post(ch, 0, Post{Text: "x"}).ID; id.ServerID() != 1 {
		t.Fatalf("first message of another chat has server id %d, want 1", id.ServerID())
	}
	msgs := w.Messages(forum)
	if len(msgs) != 4 || msgs[1].ThreadID != thread || !msgs[1].IsTopicMessage || msgs[0].IsTopicMessage {
		t.Fatalf("forum ground truth = %+v", msgs)
	}
}

func TestUpdatesOnlyForOpenedChats(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	other := f.w.AddChat(tg.KindSupergroup, "other", "alice")
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	known, err := f.c.GetChat(f.ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	unopened := f.w.Post(other, 0, Post{Text: "not opened"})
	opened := f.w.Post(f.chat, 0, doc("a.zip", 100))

	got := collectUntil(t, f.c, isLastMessage(f.chat, opened.ID))
	if ids := newMessages(got, other); len(ids) != 0 {
		t.Errorf("got updateNewMessage %v for a chat that was not opened", ids)
	}
	if ids := newMessages(got, f.chat); len(ids) != 1 || ids[0] != opened.ID {
		t.Errorf("opened chat: got new messages %v, want [%d]", ids, opened.ID)
	}
	for _, u := range got {
		if isLastMessage(other, unopened.ID)(u) {
			t.Error("got updateChatLastMessage for a member channel that was not opened")
		}
	}
	// Nor does getChat show the new message: the session's database knows
	// the chat as it was loaded.
	if c, err := f.c.GetChat(f.ctx, other); err != nil || c.LastMessageID != known.LastMessageID {
		t.Errorf("getChat of the chat not opened = last %d, %v; want the last message it knew, %d, not %d",
			c.LastMessageID, err, known.LastMessageID, unopened.ID)
	}
	// The delivered message is this client's view: a session-local file id
	// and this account's remote id.
	for _, u := range got {
		if nm, ok := u.(tg.NewMessage); ok {
			file := nm.Message.Document.File
			if file.ID == 0 || file.RemoteID == "" || file.UniqueID != opened.Document.File.UniqueID || file.Size != 100 {
				t.Errorf("delivered file = %+v", file)
			}
		}
	}
}

func TestStartupUpdatesThroughSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ready := make(chan struct{}, 1)
	s := tg.NewSession(f.c, func(u tg.Update) {
		if cs, ok := u.(tg.ConnectionStateChanged); ok && cs.State == tg.ConnReady {
			select {
			case ready <- struct{}{}:
			default:
			}
		}
	})
	defer func() { <-s.Done() }()
	defer f.c.Close()
	select {
	case <-ready:
	case <-time.After(waitTimeout):
		t.Fatal("no connection state ready at start")
	}
	// The options come before the state, so the session has them by now.
	if v, ok := s.Option("version"); !ok || v != "1.8.40" {
		t.Errorf("option version = %q, %v", v, ok)
	}
	if s.ConnectionState() != tg.ConnReady {
		t.Errorf("session state = %q", s.ConnectionState())
	}
}

func TestDisconnectLosesUpdates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	next[tg.ConnectionStateChanged](t, f.c, func(u tg.ConnectionStateChanged) bool { return u.State == tg.ConnReady })

	f.w.Disconnect("alice", 0)
	if u := next[tg.ConnectionStateChanged](t, f.c, nil); u.State != tg.ConnConnecting {
		t.Fatalf("state after Disconnect = %s, want connecting", u.State)
	}
	lost := postN(f.w, f.chat, 0, 3, "during")
	f.w.Reconnect("alice")
	got := collectUntil(t, f.c, func(u tg.Update) bool {
		s, ok := u.(tg.ConnectionStateChanged)
		return ok && s.State == tg.ConnReady
	})
	if _, ok := got[0].(tg.ConnectionStateChanged); !ok || got[0].(tg.ConnectionStateChanged).State != tg.ConnUpdating {
		t.Errorf("first update after reconnect = %#v, want connectionStateUpdating", got[0])
	}
	if ids := newMessages(got, f.chat); len(ids) != 0 {
		t.Errorf("messages posted while disconnected were delivered: %v", ids)
	}
	if !isLastMessage(f.chat, lost[2].ID)(got[1]) {
		t.Errorf("after reconnect got %#v, want updateChatLastMessage %d", got[1], lost[2].ID)
	}
	after := f.w.Post(f.chat, 0, Post{Text: "after"})
	nm := next[tg.NewMessage](t, f.c, nil)
	if nm.Message.ID != after.ID {
		t.Fatalf("first new message after reconnect = %d, want %d", nm.Message.ID, after.ID)
	}
}

// A message deleted while the account is offline stays in the session's
// database, and getMessage answers it, until the reconnect's difference
// announces the deletion.
func TestDeletionWhileDisconnectedComesAtTheReconnect(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	m := f.w.Post(f.chat, 0, Post{Text: "soon deleted"})
	next[tg.NewMessage](t, f.c, func(u tg.NewMessage) bool { return u.Message.ID == m.ID })
	f.w.Disconnect("alice", 0)
	f.w.Delete(f.chat, m.ID)
	if got, err := f.c.GetMessage(f.ctx, f.chat, m.ID); err != nil || got.ID != m.ID {
		t.Fatalf("GetMessage while offline = %+v, %v; want the database's copy", got, err)
	}
	f.w.Reconnect("alice")
	u := next[tg.MessagesDeleted](t, f.c, nil)
	if u.Chat != f.chat || !slices.Equal(u.IDs, []tg.MessageID{m.ID}) {
		t.Fatalf("the reconnect announced %+v, want the deletion of %d", u, m.ID)
	}
	if _, err := f.c.GetMessage(f.ctx, f.chat, m.ID); !errors.Is(err, tg.ErrMessageNotFound) {
		t.Fatalf("GetMessage after the reconnect: %v, want ErrMessageNotFound", err)
	}
}

// A channel's own difference comes after the session reports ready: until
// it is in, a message posted while the account was offline is too new,
// and getMessage answers 404 for it, as TDLib does.
func TestChannelDifferenceComesAfterTheReconnect(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	f := newFixture(t, Config{DifferenceDelay: delay})
	before, offline := postedWhileOffline(t, f)
	next[tg.ConnectionStateChanged](t, f.c, func(u tg.ConnectionStateChanged) bool { return u.State == tg.ConnReady })
	ready := time.Now()
	if _, err := f.c.GetMessage(f.ctx, f.chat, offline.ID); !errors.Is(err, tg.ErrMessageNotFound) {
		t.Fatalf("GetMessage at ready of a message posted offline: %v, want ErrMessageNotFound (too new)", err)
	}
	if c, err := f.c.GetChat(f.ctx, f.chat); err != nil || c.LastMessageID != before.ID {
		t.Fatalf("GetChat at ready: last %d (%v), want %d, the last before the outage", c.LastMessageID, err, before.ID)
	}
	next[tg.ChatLastMessage](t, f.c, func(u tg.ChatLastMessage) bool { return u.Chat == f.chat && u.LastMessageID == offline.ID })
	if after := time.Since(ready); after < delay/2 {
		t.Fatalf("the difference came %s after ready, want about %s", after, delay)
	}
	if got, err := f.c.GetMessage(f.ctx, f.chat, offline.ID); err != nil || got.ID != offline.ID {
		t.Fatalf("GetMessage once the difference is in = %+v, %v; want the message", got, err)
	}
}

// A channel difference due while the account is away (after a reconnect,
// or after an openChat) does not come: the next reconnect brings it.
func TestChannelDifferenceWaitsForTheNextReconnect(t *testing.T) {
	t.Parallel()
	const delay = 100 * time.Millisecond
	f := newFixture(t, Config{DifferenceDelay: delay})
	_, offline := postedWhileOffline(t, f)
	f.w.Disconnect("alice", 0)
	time.Sleep(3 * delay)
	for drained := false; !drained; {
		select {
		case u := <-f.c.Updates():
			if lm, ok := u.(tg.ChatLastMessage); ok && lm.Chat == f.chat && lm.LastMessageID == offline.ID {
				t.Fatalf("the difference came while away: %+v", lm)
			}
		default:
			drained = true
		}
	}
	// The session lacks the message: only the server could answer.
	short, cancel := context.WithTimeout(f.ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := f.c.GetMessage(short, f.chat, offline.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetMessage while away again: %v, want it to wait for the reconnect", err)
	}
	f.w.Reconnect("alice")
	next[tg.ChatLastMessage](t, f.c, func(u tg.ChatLastMessage) bool { return u.Chat == f.chat && u.LastMessageID == offline.ID })
	if got, err := f.c.GetMessage(f.ctx, f.chat, offline.ID); err != nil || got.ID != offline.ID {
		t.Fatalf("GetMessage after the second reconnect's difference = %+v, %v; want the message", got, err)
	}
}

// postedWhileOffline opens f's chat, posts a message the session learns
// by update, then one while the account is offline, and reconnects the
// account; it returns both messages.
func postedWhileOffline(t *testing.T, f *fixture) (before, offline tg.Message) {
	t.Helper()
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	before = f.w.Post(f.chat, 0, Post{Text: "before"})
	next[tg.NewMessage](t, f.c, func(u tg.NewMessage) bool { return u.Message.ID == before.ID })
	f.w.Disconnect("alice", 0)
	offline = f.w.Post(f.chat, 0, Post{Text: "while offline"})
	f.w.Reconnect("alice")
	return before, offline
}

func TestDisconnectReconnectsAfterDuration(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.w.Disconnect("alice", 20*time.Millisecond)
	var states []tg.ConnectionState
	collectUntil(t, f.c, func(u tg.Update) bool {
		s, ok := u.(tg.ConnectionStateChanged)
		if ok {
			states = append(states, s.State)
		}
		return ok && s.State == tg.ConnReady && len(states) > 1
	})
	want := []tg.ConnectionState{tg.ConnReady, tg.ConnConnecting, tg.ConnUpdating, tg.ConnReady}
	if strings.Join(stateStrings(states), ",") != strings.Join(stateStrings(want), ",") {
		t.Fatalf("states = %v, want %v", states, want)
	}
}

func stateStrings(s []tg.ConnectionState) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = string(x)
	}
	return out
}

func TestChannelGapDropsAboveThreshold(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{ChannelGap: 5})
	marker := f.w.AddChat(tg.KindChannel, "marker", "alice")
	for _, id := range []tg.ChatID{f.chat, marker} {
		if err := f.c.OpenChat(f.ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody drains while 8 messages arrive: only 5 fit in the gap.
	posted := postN(f.w, f.chat, 0, 8, "burst")
	m := f.w.Post(marker, 0, Post{Text: "marker"})
	got := collectUntil(t, f.c, func(u tg.Update) bool {
		nm, ok := u.(tg.NewMessage)
		return ok && nm.Message.ID == m.ID && nm.Message.ChatID == marker
	})
	ids := newMessages(got, f.chat)
	if len(ids) != 5 || ids[0] != posted[0].ID || ids[4] != posted[4].ID {
		t.Fatalf("delivered %v, want the first 5 of %d", ids, len(posted))
	}
	// Once drained, the chat's updates flow again.
	more := f.w.Post(f.chat, 0, Post{Text: "after"})
	if nm := next[tg.NewMessage](t, f.c, nil); nm.Message.ID != more.ID {
		t.Fatalf("after draining got %d, want %d", nm.Message.ID, more.ID)
	}
}

func TestDropRateOneDropsEveryNewMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{DropRate: 1})
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	posted := postN(f.w, f.chat, 0, 10, "m")
	got := collectUntil(t, f.c, isLastMessage(f.chat, posted[9].ID))
	if ids := newMessages(got, f.chat); len(ids) != 0 {
		t.Fatalf("DropRate 1 delivered %v", ids)
	}
}

func TestGetMessageAndByDate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	first := f.w.Post(f.chat, 0, Post{Text: "one"})
	f.clk.Advance(time.Hour)
	second := f.w.Post(f.chat, 0, doc("x.zip", 5))
	f.clk.Advance(time.Hour)
	third := f.w.Post(f.chat, 0, Post{Text: "three"})

	got, err := f.c.GetMessage(f.ctx, f.chat, second.ID)
	if err != nil || got.ID != second.ID || got.Document == nil || got.Document.FileName != "x.zip" {
		t.Fatalf("GetMessage = %+v, %v", got, err)
	}
	f.w.Delete(f.chat, second.ID)
	// The session does not follow the chat: its database keeps the
	// message until opening the chat brings the deletion.
	if got, err := f.c.GetMessage(f.ctx, f.chat, second.ID); err != nil || got.ID != second.ID {
		t.Fatalf("GetMessage of a message deleted unbeknown to the session = %+v, %v; want its database's copy", got, err)
	}
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	if u := next[tg.MessagesDeleted](t, f.c, nil); u.Chat != f.chat || !slices.Equal(u.IDs, []tg.MessageID{second.ID}) {
		t.Fatalf("opening the chat announced %+v, want the deletion of %d", u, second.ID)
	}
	_, err = f.c.GetMessage(f.ctx, f.chat, second.ID)
	var te *tg.Error
	if !errors.Is(err, tg.ErrMessageNotFound) || !errors.As(err, &te) || te.Code != 404 {
		t.Fatalf("GetMessage of a deleted message: %v, want 404 wrapping ErrMessageNotFound", err)
	}

	cases := []struct {
		date time.Time
		want tg.MessageID
	}{
		{first.Date.Add(-time.Second), 0},
		{first.Date, first.ID},
		{first.Date.Add(90 * time.Minute), first.ID}, // the message between was deleted
		{third.Date.Add(time.Minute), third.ID},
	}
	for _, tc := range cases {
		m, err := f.c.GetChatMessageByDate(f.ctx, f.chat, tc.date)
		if tc.want == 0 {
			if !errors.Is(err, tg.ErrMessageNotFound) {
				t.Errorf("GetChatMessageByDate before the first message = %v, want 404 like TDLib", err)
			}
			continue
		}
		if err != nil || m.ID != tc.want {
			t.Errorf("GetChatMessageByDate(%s) = %d, %v; want %d", tc.date, m.ID, err, tc.want)
		}
	}
	chat, err := f.c.GetChat(f.ctx, f.chat)
	if err != nil || chat.LastMessageID != third.ID {
		t.Fatalf("GetChat last message = %d, %v; want %d", chat.LastMessageID, err, third.ID)
	}
}

func TestForumTopics(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	forum := f.w.AddChat(tg.KindForum, "forum", "alice")
	if err := f.c.OpenChat(f.ctx, forum); err != nil {
		t.Fatal(err)
	}
	thread := f.w.AddTopic(forum, "Books")
	info := next[tg.ForumTopicInfo](t, f.c, nil)
	if info.Topic.ThreadID != thread || info.Topic.Name != "Books" {
		t.Fatalf("topic created: %+v", info.Topic)
	}
	m := f.w.Post(forum, thread, doc("b.zip", 3))
	f.w.RenameTopic(forum, thread, "Old books")
	info = next[tg.ForumTopicInfo](t, f.c, nil)
	if info.Topic.Name != "Old books" {
		t.Fatalf("topic renamed: %+v", info.Topic)
	}
	topic, err := f.c.GetForumTopic(f.ctx, forum, thread)
	if err != nil || topic.Name != "Old books" || topic.LastMessageID <= m.ID {
		t.Fatalf("GetForumTopic = %+v, %v (the rename's service message is the topic's last)", topic, err)
	}
	if _, err := f.c.GetForumTopic(f.ctx, forum, thread+1); tg.Classify(err) != tg.ClassPermanent {
		t.Fatalf("unknown topic: %v", err)
	}
	if _, err := f.c.GetForumTopic(f.ctx, f.chat, thread); err == nil {
		t.Fatal("GetForumTopic on a channel succeeded")
	}
}

func TestEditIntoDocument(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	m := f.w.Post(f.chat, 0, Post{Text: "soon a file"})
	next[tg.NewMessage](t, f.c, nil)
	f.w.EditIntoDocument(f.chat, m.ID, Post{FileName: "late.zip", Data: []byte("PK"), Caption: "edited"})
	u := next[tg.MessageContentChanged](t, f.c, nil)
	if u.Chat != f.chat || u.Message != m.ID {
		t.Fatalf("content changed = %+v", u)
	}
	got, err := f.c.GetMessage(f.ctx, f.chat, m.ID)
	if err != nil || got.Document == nil || got.Document.FileName != "late.zip" || got.Caption != "edited" {
		t.Fatalf("edited message = %+v, %v", got, err)
	}
}

func TestPrivateChatIsPermanent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.w.SetPrivate(f.chat, true)
	_, err := f.c.GetChat(f.ctx, f.chat)
	var te *tg.Error
	if tg.Classify(err) != tg.ClassPermanent || !errors.As(err, &te) || te.Code != 400 || te.Message != "CHANNEL_PRIVATE" {
		t.Fatalf("GetChat of a private chat: %v (class %s)", err, tg.Classify(err))
	}
	if _, err := f.c.SearchChatMessages(f.ctx, tg.Search{Chat: f.chat, Limit: 5}); tg.Classify(err) != tg.ClassPermanent {
		t.Fatalf("search in a private chat: %v", err)
	}
	f.w.SetPrivate(f.chat, false)
	if _, err := f.c.GetChat(f.ctx, f.chat); err != nil {
		t.Fatalf("GetChat after access came back: %v", err)
	}
}

func TestFloodWaitInjection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.w.InjectFloodWait("alice", tg.MethodGetChat, 30*time.Second, 2)
	for i := range 2 {
		_, err := f.c.GetChat(f.ctx, f.chat)
		d, ok := tg.FloodWait(err)
		var te *tg.Error
		if tg.Classify(err) != tg.ClassFloodWait || !ok || d != 30*time.Second ||
			!errors.As(err, &te) || te.Code != 429 || te.Message != "Too Many Requests: retry after 30" {
			t.Fatalf("call %d: %v (class %s)", i, err, tg.Classify(err))
		}
	}
	if _, err := f.c.GetChat(f.ctx, f.chat); err != nil {
		t.Fatalf("third call: %v", err)
	}
	if _, err := f.c.GetMe(f.ctx); err != nil {
		t.Fatalf("other methods are not affected: %v", err)
	}
	if n := f.w.Calls("alice")[tg.MethodGetChat]; n != 3 {
		t.Fatalf("getChat calls = %d, want 3 (failed ones count)", n)
	}
}

func TestCallCounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.w.AddAccount("bob", true)
	b := f.w.Client("bob")
	defer b.Close()

	f.c.GetChat(f.ctx, f.chat)
	f.c.GetChat(f.ctx, 42) // fails, still counted
	f.c.OpenChat(f.ctx, f.chat)
	me, err := b.GetMe(f.ctx)
	if err != nil || !me.IsPremium || me.Username != "bob" {
		t.Fatalf("GetMe = %+v, %v", me, err)
	}
	want := map[string]int{tg.MethodLoadChats: 1, tg.MethodGetChat: 2, tg.MethodOpenChat: 1}
	if got := f.w.Calls("alice"); !mapsEqual(got, want) {
		t.Errorf("alice calls = %v, want %v", got, want)
	}
	total := f.w.TotalCalls()
	if total[tg.MethodGetMe] != 1 || total[tg.MethodGetChat] != 2 {
		t.Errorf("total calls = %v", total)
	}
	f.w.ResetCalls()
	if got := f.w.TotalCalls(); len(got) != 0 {
		t.Errorf("after reset: %v", got)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestClosedClient(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	for u := range f.c.Updates() {
		_ = u // buffered startup updates may or may not be discarded
	}
	if _, err := f.c.GetChat(f.ctx, f.chat); !errors.Is(err, tg.ErrClosed) {
		t.Errorf("GetChat after Close: %v", err)
	}
	if err := f.c.LoadChats(f.ctx); !errors.Is(err, tg.ErrClosed) {
		t.Errorf("LoadChats after Close: %v", err)
	}
	if err := f.c.Close(); !errors.Is(err, tg.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func TestLatencyHonoursContextAndClose(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{Latency: time.Hour})
	w.AddAccount("a", false)
	c := w.Client("a")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.GetMe(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetMe under a deadline with an hour of latency: %v", err)
	}
	// Close ends a request waiting out its latency (or refuses it, if Close
	// came first).
	errc := make(chan error, 1)
	go func() {
		_, err := c.GetMe(t.Context())
		errc <- err
	}()
	c.Close()
	if err := <-errc; !errors.Is(err, tg.ErrClosed) {
		t.Fatalf("GetMe across Close: %v", err)
	}
}

func TestDownload(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{DownloadPartSize: 250})
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	posted := f.w.Post(f.chat, 0, doc("dir/My file.zip", 1000))
	m, err := f.c.GetMessage(f.ctx, f.chat, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	file := m.Document.File
	started, err := f.c.DownloadFile(f.ctx, file.ID)
	if err != nil || started.DownloadDone {
		t.Fatalf("DownloadFile = %+v, %v; want a download in progress", started, err)
	}
	var progress []tg.File
	done := next[tg.FileUpdated](t, f.c, func(u tg.FileUpdated) bool {
		if !u.File.DownloadDone {
			progress = append(progress, u.File)
		}
		return u.File.DownloadDone
	}).File
	if len(progress) == 0 || !progress[0].DownloadActive || progress[0].Downloaded <= 0 || progress[0].Downloaded >= 1000 {
		t.Errorf("progress updates = %+v", progress)
	}
	if done.ID != file.ID || done.Downloaded != 1000 || done.DownloadActive {
		t.Errorf("final update = %+v", done)
	}
	if !strings.HasPrefix(done.LocalPath, f.files+"/alice/") || !strings.Contains(done.LocalPath, "My file.zip") {
		t.Errorf("LocalPath = %q", done.LocalPath)
	}
	data, err := os.ReadFile(done.LocalPath)
	if err != nil || !bytes.Equal(data, f.w.FileData(file.UniqueID)) {
		t.Fatalf("downloaded bytes differ: %v", err)
	}

	// A second download is complete at once and emits nothing: the next
	// update is the message posted afterwards.
	again, err := f.c.DownloadFile(f.ctx, file.ID)
	if err != nil || !again.DownloadDone || again.LocalPath != done.LocalPath {
		t.Fatalf("second DownloadFile = %+v, %v", again, err)
	}
	marker := f.w.Post(f.chat, 0, Post{Text: "marker"})
	got := collectUntil(t, f.c, func(u tg.Update) bool {
		nm, ok := u.(tg.NewMessage)
		return ok && nm.Message.ID == marker.ID
	})
	for _, u := range got {
		if _, ok := u.(tg.FileUpdated); ok {
			t.Errorf("completed download emitted %#v", u)
		}
	}
	// The message now shows the local copy.
	m, _ = f.c.GetMessage(f.ctx, f.chat, posted.ID)
	if !m.Document.File.DownloadDone || m.Document.File.LocalPath != done.LocalPath {
		t.Errorf("message file after download = %+v", m.Document.File)
	}

	if _, err := f.c.DownloadFile(f.ctx, 999_999); tg.Classify(err) != tg.ClassPermanent {
		t.Errorf("unknown file id: %v", err)
	}
}

func TestFileIDsAreSessionLocal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	posted := f.w.Post(f.chat, 0, doc("a.zip", 10))
	m1, err := f.c.GetMessage(f.ctx, f.chat, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	c2 := f.w.Client("alice")
	defer c2.Close()
	if err := c2.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	m2, err := c2.GetMessage(f.ctx, f.chat, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	f1, f2 := m1.Document.File, m2.Document.File
	if f1.ID == f2.ID || f1.UniqueID != f2.UniqueID || f1.RemoteID != f2.RemoteID {
		t.Fatalf("restart: file %+v vs %+v; want new local id, same unique and remote id", f1, f2)
	}
	if _, err := c2.DownloadFile(f.ctx, f1.ID); err == nil {
		t.Fatal("a file id from another client instance was accepted")
	}
}

func TestForwardAndReupload(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	other := f.w.AddChat(tg.KindChannel, "other", "alice")
	orig := f.w.Post(f.chat, 0, doc("a.zip", 64))
	fwd := f.w.Post(other, 0, Post{SameFileAs: orig.Document.File.UniqueID})
	again := f.w.Post(other, 0, Post{FileName: "a.zip", Data: f.w.FileData(orig.Document.File.UniqueID)})
	if fwd.Document.File.UniqueID != orig.Document.File.UniqueID || fwd.Document.FileName != "a.zip" {
		t.Errorf("forward = %+v, want the same unique id and name", fwd.Document)
	}
	if again.Document.File.UniqueID == orig.Document.File.UniqueID {
		t.Error("a re-upload kept the unique id")
	}
	if !bytes.Equal(f.w.FileData(again.Document.File.UniqueID), f.w.FileData(orig.Document.File.UniqueID)) {
		t.Error("re-upload changed the bytes")
	}
	// One client sees the forwarded file under one session-local id.
	m1, err1 := f.c.GetMessage(f.ctx, f.chat, orig.ID)
	m2, err2 := f.c.GetMessage(f.ctx, other, fwd.ID)
	if err1 != nil || err2 != nil || m1.Document.File.ID != m2.Document.File.ID {
		t.Errorf("file ids %d and %d (%v, %v), want equal", m1.Document.File.ID, m2.Document.File.ID, err1, err2)
	}
}

func TestDeletingTheLastMessageUpdatesChatLastMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	msgs := postN(f.w, f.chat, 0, 2, "m")
	next[tg.ChatLastMessage](t, f.c, func(u tg.ChatLastMessage) bool { return u.LastMessageID == msgs[1].ID })
	f.w.Delete(f.chat, msgs[0].ID) // not the last: no update
	f.w.Delete(f.chat, msgs[1].ID)
	u := next[tg.ChatLastMessage](t, f.c, nil)
	if u.LastMessageID != 0 {
		t.Fatalf("after deleting everything the last message is %d, want 0", u.LastMessageID)
	}
}

// An archived chat is unknown until the archive chat list is loaded;
// loading the main list alone is not enough.
func TestArchivedChatNeedsArchiveList(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{})
	w.AddAccount("alice", false)
	main := w.AddChat(tg.KindChannel, "news", "alice")
	archived := w.AddChat(tg.KindChannel, "old news", "alice")
	w.SetArchived(archived, true)
	ctx := t.Context()

	c := w.Client("alice")
	defer c.Close()
	if err := c.LoadChatList(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetChat(ctx, main); err != nil {
		t.Fatalf("getChat of a main-list chat after loading the main list: %v", err)
	}
	if _, err := c.GetChat(ctx, archived); !errors.Is(err, tg.ErrChatNotFound) {
		t.Fatalf("getChat of an archived chat with only the main list loaded: %v, want Chat not found", err)
	}
	if err := c.LoadChatList(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := c.OpenChat(ctx, archived); err != nil {
		t.Fatalf("openChat of an archived chat after loading the archive list: %v", err)
	}

	// The port's LoadChats loads both lists.
	c2 := w.Client("alice")
	defer c2.Close()
	if err := c2.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.GetChat(ctx, archived); err != nil {
		t.Fatalf("getChat of an archived chat after LoadChats: %v", err)
	}
}
