package tgsim

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/tg"
)

// sendFixture has alice and bob, both members of the source and of the
// destination.
type sendFixture struct {
	*fixture
	dest tg.ChatID
	src  tg.Message // a document as alice's client sees it
}

func newSendFixture(t *testing.T, cfg Config) sendFixture {
	t.Helper()
	f := newFixture(t, cfg)
	f.w.AddAccount("bob", false)
	f.w.Join("bob", f.chat)
	dest := f.w.AddChat(tg.KindChannel, "dest", "alice", "bob")
	posted := f.w.Post(f.chat, 0, doc("set.zip", 300))
	src, err := f.c.GetMessage(f.ctx, f.chat, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	return sendFixture{fixture: f, dest: dest, src: src}
}

func TestSendDocumentTemporaryThenSucceeded(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	tmp, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "token-1")
	if err != nil {
		t.Fatal(err)
	}
	if tmp.ID.IsServer() || tmp.ID == 0 || tmp.ChatID != f.dest || tmp.Caption != "token-1" {
		t.Fatalf("temporary message = %+v; want a local id in the destination", tmp)
	}
	ok := next[tg.SendSucceeded](t, f.c, nil)
	if ok.OldMessageID != tmp.ID || !ok.Message.ID.IsServer() || ok.Message.ChatID != f.dest ||
		ok.Message.Caption != "token-1" || ok.Message.Document.File.UniqueID != f.src.Document.File.UniqueID {
		t.Fatalf("send succeeded = %+v", ok)
	}
	truth := f.w.Messages(f.dest)
	if len(truth) != 1 || truth[0].ID != ok.Message.ID || truth[0].Document.File.UniqueID != f.src.Document.File.UniqueID {
		t.Fatalf("destination ground truth = %+v", truth)
	}

	// A second send to the same chat gets a different temporary id.
	tmp2, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "token-2")
	if err != nil || tmp2.ID == tmp.ID || tmp2.ID.IsServer() {
		t.Fatalf("second temporary id %d (first %d), %v", tmp2.ID, tmp.ID, err)
	}
	next[tg.SendSucceeded](t, f.c, func(u tg.SendSucceeded) bool { return u.OldMessageID == tmp2.ID })
}

func TestSendDocumentRefusals(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	bob := f.w.Client("bob")
	defer bob.Close()
	if err := bob.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	// Bob can see the file, but alice's remote id is not his.
	if _, err := bob.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "x"); tg.Classify(err) != tg.ClassPermanent {
		t.Errorf("send with another account's remote id: %v, want a 400", err)
	}
	// With his own remote id it works.
	bm, err := bob.GetMessage(f.ctx, f.chat, f.src.ID)
	if err != nil {
		t.Fatal(err)
	}
	if bm.Document.File.RemoteID == f.src.Document.File.RemoteID {
		t.Fatal("remote ids are equal across accounts")
	}
	if _, err := bob.SendDocument(f.ctx, f.dest, bm.Document.File.RemoteID, "x"); err != nil {
		t.Errorf("send with his own remote id: %v", err)
	}
	// Once the only message carrying a file is gone, nobody can send it.
	// (A file of its own: bob's copy above keeps set.zip visible in the
	// destination as soon as his send lands.)
	lone := f.w.Post(f.chat, 0, doc("lone.zip", 300))
	lm, err := f.c.GetMessage(f.ctx, f.chat, lone.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.w.Delete(f.chat, lone.ID)
	if _, err := f.c.SendDocument(f.ctx, f.dest, lm.Document.File.RemoteID, "x"); tg.Classify(err) != tg.ClassPermanent {
		t.Errorf("send of a file no longer visible: %v", err)
	}
	// A destination the account is not in is unknown.
	other := f.w.AddChat(tg.KindChannel, "not mine", "bob")
	if _, err := f.c.SendDocument(f.ctx, other, f.src.Document.File.RemoteID, "x"); !errors.Is(err, tg.ErrChatNotFound) {
		t.Errorf("send to a non-member chat: %v", err)
	}
	if _, err := f.c.SendDocument(f.ctx, f.dest, "garbage", "x"); tg.Classify(err) != tg.ClassPermanent {
		t.Errorf("send with a garbage remote id: %v", err)
	}
}

func TestSendFailed(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendFailRate: 1})
	tmp, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "token")
	if err != nil {
		t.Fatal(err)
	}
	failed := next[tg.SendFailed](t, f.c, nil)
	if failed.OldMessageID != tmp.ID || failed.Chat != f.dest || tg.Classify(failed.Err) != tg.ClassRetryable {
		t.Fatalf("send failed = %+v (class %s)", failed, tg.Classify(failed.Err))
	}
	if got := f.w.Messages(f.dest); len(got) != 0 {
		t.Fatalf("a failed send landed: %+v", got)
	}
}

// The crash window stashd must close: the client dies after sendMessage but
// before the outcome. The message lands anyway, no update reports it, and a
// fresh client finds it by searching for the caption's token.
func TestCloseBeforeOutcomeStillLands(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendLatency: time.Hour})
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "mirror tok-abc123"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	for u := range f.c.Updates() {
		if _, ok := u.(tg.SendSucceeded); ok {
			t.Fatal("outcome delivered after Close")
		}
	}
	truth := f.w.Messages(f.dest)
	if len(truth) != 1 || truth[0].Caption != "mirror tok-abc123" {
		t.Fatalf("destination after the crash = %+v", truth)
	}

	c2 := f.w.Client("alice")
	defer c2.Close()
	if err := c2.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	found, err := c2.SearchChatMessages(f.ctx, tg.Search{Chat: f.dest, Query: "tok-abc123", Filter: tg.FilterDocument, Limit: 10})
	if err != nil || len(found) != 1 || found[0].ID != truth[0].ID {
		t.Fatalf("search for the token = %+v, %v", found, err)
	}
}

func TestSessionSendAndDownload(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendLatency: 5 * time.Millisecond})
	s := tg.NewSession(f.c, func(tg.Update) {})
	defer func() { <-s.Done() }()
	defer f.c.Close()

	m, err := s.Send(f.ctx, f.dest, f.src.Document.File.RemoteID, "via session")
	if err != nil || !m.ID.IsServer() || m.Caption != "via session" {
		t.Fatalf("Session.Send = %+v, %v", m, err)
	}
	file, err := s.Download(f.ctx, f.src.Document.File, 0)
	if err != nil || !file.DownloadDone {
		t.Fatalf("Session.Download = %+v, %v", file, err)
	}
	data, err := os.ReadFile(file.LocalPath)
	if err != nil || !bytes.Equal(data, f.w.FileData(file.UniqueID)) {
		t.Fatalf("downloaded bytes differ: %v", err)
	}
	// Already downloaded: returns at once.
	again, err := s.Download(f.ctx, file, 0)
	if err != nil || again.LocalPath != file.LocalPath {
		t.Fatalf("second Session.Download = %+v, %v", again, err)
	}
}

func TestSendFloodWaitFailure(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendFloodRate: 1, SendFloodWait: 7 * time.Second})
	tmp, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "token")
	if err != nil {
		t.Fatal(err)
	}
	failed := next[tg.SendFailed](t, f.c, nil)
	d, ok := tg.FloodWait(failed.Err)
	var te *tg.Error
	if failed.OldMessageID != tmp.ID || !ok || d != 7*time.Second || !errors.As(failed.Err, &te) || te.Code != 429 ||
		te.Message != "Too Many Requests: retry after 7" {
		t.Fatalf("send failed = %+v, want a 429 retry after 7", failed)
	}
	if got := f.w.Messages(f.dest); len(got) != 0 {
		t.Fatalf("a flood-waited send landed: %+v", got)
	}
	if st := f.w.SendStats(); st.FloodWaited != 1 || st.Succeeded != 0 {
		t.Fatalf("send stats = %+v", st)
	}
}

// A vanished send: updateDeleteMessages for the temporary id, nothing else,
// and nothing lands.
func TestSendVanishes(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendVanishRate: 1})
	tmp, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "gone")
	if err != nil {
		t.Fatal(err)
	}
	got := collectUntil(t, f.c, func(u tg.Update) bool { _, ok := u.(tg.MessagesDeleted); return ok })
	del := got[len(got)-1].(tg.MessagesDeleted)
	if del.Chat != f.dest || len(del.IDs) != 1 || del.IDs[0] != tmp.ID || !del.IsPermanent || del.FromCache {
		t.Fatalf("deletion = %+v, want the temporary id %d", del, tmp.ID)
	}
	for _, u := range got {
		switch u.(type) {
		case tg.SendSucceeded, tg.SendFailed:
			t.Fatalf("a vanished send also reported %T", u)
		}
	}
	if m := f.w.Messages(f.dest); len(m) != 0 {
		t.Fatalf("a vanished send landed: %+v", m)
	}
	if v := f.w.VanishedCaptions(); len(v) != 1 || v[0] != "gone" {
		t.Fatalf("vanished captions = %q", v)
	}
}

// With ResendAfterRestart a send pending at Close lands when the account's
// next client starts, which re-sends it as TDLib does: under a new
// temporary id of its own (not the one the closed client issued), dated
// now, announced as a send's start is. A pending send more than a day old
// fails unsent.
func TestSendResentAfterRestart(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendLatency: time.Hour, ResendAfterRestart: true})
	tmp, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:tok1")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.w.Messages(f.dest); len(got) != 0 {
		t.Fatalf("landed before the next client started: %+v", got)
	}
	c2 := f.w.Client("alice")
	defer c2.Close()
	// TDLib announces the re-sent message as a send's start, then settles it.
	resent := next[tg.NewMessage](t, c2, func(u tg.NewMessage) bool { return u.Message.Caption == "stashd:tok1" })
	ok := next[tg.SendSucceeded](t, c2, nil)
	if ok.OldMessageID != resent.Message.ID {
		t.Fatalf("outcome of %d; announced %d", ok.OldMessageID, resent.Message.ID)
	}
	truth := f.w.Messages(f.dest)
	if ok.OldMessageID == tmp.ID || ok.OldMessageID.IsServer() || len(truth) != 1 || ok.Message.ID != truth[0].ID || ok.Message.Caption != "stashd:tok1" {
		t.Fatalf("re-sent outcome %+v (closed client's temporary id %d), destination %+v", ok, tmp.ID, truth)
	}
	if st := f.w.SendStats(); st.Resent != 1 {
		t.Fatalf("send stats = %+v", st)
	}

	// A send left pending more than a day before the restart fails, as
	// TDLib fails it, and stays in the session's view as a failed message.
	if err := c2.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:tok2"); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(25 * time.Hour)
	c3 := f.w.Client("alice")
	defer c3.Close()
	failed := next[tg.SendFailed](t, c3, nil)
	if failed.Err == nil || !strings.Contains(failed.Err.Error(), "Message is too old to be re-sent automatically") || !slices.Equal(c3.FailedMessages(f.dest), []tg.MessageID{failed.MessageID}) {
		t.Fatalf("send failed = %+v, failed messages %v; want it too old to re-send, kept", failed, c3.FailedMessages(f.dest))
	}
	if got := f.w.Messages(f.dest); len(got) != 1 {
		t.Fatalf("destination after a restart a day later = %+v; want the old send not sent", got)
	}
	if st := f.w.SendStats(); st.Resent != 1 || st.Expired != 1 {
		t.Fatalf("send stats = %+v; want one resent and one expired", st)
	}
}

// A send TDLib deletes instead of sending fails at once with
// ErrSendVanished rather than waiting for an outcome that never comes.
func TestSessionSendVanished(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendVanishRate: 1})
	s := tg.NewSession(f.c, func(tg.Update) {})
	defer func() { <-s.Done() }()
	defer f.c.Close()
	ctx, cancel := context.WithTimeout(f.ctx, waitTimeout)
	defer cancel()
	_, err := s.Send(ctx, f.dest, f.src.Document.File.RemoteID, "x")
	if !errors.Is(err, tg.ErrSendVanished) || tg.Classify(err) != tg.ClassRetryable {
		t.Fatalf("Send = %v, want ErrSendVanished (retryable)", err)
	}
}

// A send without an outcome ends at the session's send deadline.
func TestSessionSendDeadline(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendLatency: time.Hour})
	s := tg.NewSession(f.c, func(tg.Update) {})
	s.SendTimeout = 20 * time.Millisecond
	defer func() { <-s.Done() }()
	defer f.c.Close()
	ctx, cancel := context.WithTimeout(f.ctx, waitTimeout)
	defer cancel()
	_, err := s.Send(ctx, f.dest, f.src.Document.File.RemoteID, "x")
	if !errors.Is(err, tg.ErrSendTimeout) || ctx.Err() != nil {
		t.Fatalf("Send = %v, want ErrSendTimeout before the caller's deadline", err)
	}
}

// A send refused with 429 in updateMessageSendFailed pauses the sends to
// its chat, not every request of the account (a 429 answering a request
// does that), and the wait is counted.
func TestSessionSendFloodWaitPausesItsChat(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendFloodRate: 1, SendFloodWait: time.Minute})
	m := tg.NewMetrics(prometheus.NewRegistry())
	p := tg.NewPaced(f.c, tg.PacedConfig{Account: "alice"}, m)
	s := tg.NewSession(p, func(tg.Update) {})
	defer func() { <-s.Done() }()
	defer f.c.Close()
	before := time.Now()
	_, err := s.Send(f.ctx, f.dest, f.src.Document.File.RemoteID, "x")
	if d, ok := tg.FloodWait(err); !ok || d != time.Minute {
		t.Fatalf("Send = %v, want a flood wait of 1m", err)
	}
	if until := p.PausedUntil(); !until.IsZero() {
		t.Fatalf("account paused until %v, want no account pause (the chat's limit refused the send)", until)
	}
	if d := s.ChatPause(f.dest); d < time.Minute-time.Since(before) {
		t.Fatalf("sends to the chat paused for %v, want about a minute", d)
	}
	if got := testutil.ToFloat64(m.FloodWaitSeconds("alice")); got != 60 {
		t.Fatalf("flood wait seconds = %v, want 60", got)
	}
}

// After a restart the outcome of the previous session's pending send
// arrives under a temporary id this session never issued: the session hands
// it to its handler instead of keeping it for a Send that will never come.
func TestSessionHandsOverUnclaimedSendOutcome(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendLatency: time.Hour, ResendAfterRestart: true})
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:tok"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	got := make(chan tg.SendSucceeded, 1)
	c2 := f.w.Client("alice")
	s := tg.NewSession(c2, func(u tg.Update) {
		if ok, is := u.(tg.SendSucceeded); is {
			got <- ok
		}
	})
	defer func() { <-s.Done() }()
	defer c2.Close()
	select {
	case ok := <-got:
		if ok.Message.Caption != "stashd:tok" || !ok.Message.ID.IsServer() {
			t.Fatalf("handed over %+v", ok)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the re-sent outcome never reached the handler")
	}
}

// A file seen only in chats with protected content cannot be re-sent:
// TDLib refuses with 400 "Message has protected content and can't be
// forwarded", a permanent error.
func TestSendFromProtectedChatIsRefused(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{Seed: 1, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	src := w.AddChat(tg.KindChannel, "src", "a")
	dest := w.AddChat(tg.KindChannel, "dest", "a")
	w.SetProtected(src, true)
	m := w.Post(src, 0, Post{FileName: "x.zip", Data: []byte("zip")})
	c := w.Client("a")
	defer c.Close()
	ctx := t.Context()
	if err := c.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetMessage(ctx, src, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SendDocument(ctx, dest, got.Document.File.RemoteID, "c")
	if !errors.Is(err, tg.ErrProtectedContent) || tg.Classify(err) != tg.ClassPermanent {
		t.Fatalf("send from a protected chat: %v, want a permanent ErrProtectedContent", err)
	}
	w.SetProtected(src, false)
	if _, err := c.SendDocument(ctx, dest, got.Document.File.RemoteID, "c"); err != nil {
		t.Errorf("send once protection is lifted: %v", err)
	}
}

// A member without write access is refused as TDLib refuses it, from the
// rights it knows: in a channel, as a member who is no administrator; in
// a supergroup or forum, as a member restricted from sending documents.
// stashd takes each for a lost right to post (tg.NoWriteAccess), nothing
// else.
func TestSendWithoutWriteAccessIsRefusedAsTDLibDoes(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	for _, c := range []struct {
		kind tg.ChatKind
		want string
	}{
		{tg.KindChannel, "Need administrator rights in the channel chat"},
		{tg.KindSupergroup, "Not enough rights to send documents to the chat"},
		{tg.KindForum, "Not enough rights to send documents to the chat"},
	} {
		dest := f.w.AddChat(c.kind, "dest "+string(c.kind), "alice")
		f.w.SetWriteAccess("alice", dest, false)
		_, err := f.c.SendDocument(f.ctx, dest, f.src.Document.File.RemoteID, "token")
		var te *tg.Error
		if !errors.As(err, &te) || te.Code != 400 || te.Message != c.want || !tg.NoWriteAccess(err) {
			t.Errorf("send to a %s without write access: %v; want 400 %q, taken for no write access", c.kind, err, c.want)
		}
		f.w.SetWriteAccess("alice", dest, true)
		if _, err := f.c.SendDocument(f.ctx, dest, f.src.Document.File.RemoteID, "token"); err != nil {
			t.Errorf("send to a %s once write access is back: %v", c.kind, err)
		}
	}
}

// An account whose rights the server revoked while its TDLib did not hear
// of it (the update lost in a gap) gets its send past TDLib's own check:
// the temporary message comes back, then the server's refusal, as TDLib
// passes it on (403 made 400, the server's message kept), which stashd
// takes for no write access. Once the sessions are told, TDLib refuses
// the send itself.
func TestServerRefusesWhatLaggingRightsAllow(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	for _, c := range []struct {
		kind        tg.ChatKind
		server, tdl string
	}{
		{tg.KindChannel, "CHAT_WRITE_FORBIDDEN", "Need administrator rights in the channel chat"},
		{tg.KindSupergroup, "CHAT_SEND_DOCS_FORBIDDEN", "Not enough rights to send documents to the chat"},
	} {
		dest := f.w.AddChat(c.kind, "dest "+string(c.kind), "alice")
		f.w.SetServerWriteAccess("alice", dest, false)
		tmp, err := f.c.SendDocument(f.ctx, dest, f.src.Document.File.RemoteID, "token")
		if err != nil {
			t.Fatalf("send to a %s whose rights TDLib still holds: %v; want it accepted", c.kind, err)
		}
		failed := next[tg.SendFailed](t, f.c, nil)
		var te *tg.Error
		if failed.OldMessageID != tmp.ID || !errors.As(failed.Err, &te) || te.Code != 400 || te.Message != c.server ||
			!tg.NoWriteAccess(failed.Err) {
			t.Errorf("send to a %s the server refuses: %+v; want message %d failed with 400 %s, taken for no write access",
				c.kind, failed, tmp.ID, c.server)
		}
		if n := len(f.w.Messages(dest)); n != 0 {
			t.Errorf("%d messages landed in a %s the account may not post in", n, c.kind)
		}
		f.w.SetWriteAccess("alice", dest, false)
		if _, err := f.c.SendDocument(f.ctx, dest, f.src.Document.File.RemoteID, "token"); !errors.As(err, &te) || te.Message != c.tdl {
			t.Errorf("send to a %s once TDLib knows: %v; want its own refusal %q", c.kind, err, c.tdl)
		}
	}
	if got := f.w.SendStats().WriteRefused; got != 2 {
		t.Errorf("SendStats().WriteRefused = %d, want 2", got)
	}
}

// An account removed from a destination meets the same two judges. Its
// sessions told of it (LoseAccess: ChatAccessLost) refuse the send
// themselves with "Have no write access to the chat". A session not told
// (the channel made private) makes the message; the server refuses it
// with CHANNEL_PRIVATE, and the session takes itself as having left
// (ChatAccessLost before the failure) and refuses the next send itself.
// Access back, sends go again.
func TestSendToAChatTheAccountWasRemovedFrom(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	remote := f.src.Document.File.RemoteID
	noWrite := func(err error) bool {
		var te *tg.Error
		return errors.As(err, &te) && te.Code == 400 && te.Message == "Have no write access to the chat" && tg.NoWriteAccess(err)
	}

	told := f.w.AddChat(tg.KindChannel, "told", "alice")
	f.w.LoseAccess(told, true)
	next[tg.ChatAccessLost](t, f.c, func(u tg.ChatAccessLost) bool { return u.Chat == told })
	if _, err := f.c.SendDocument(f.ctx, told, remote, "token"); !noWrite(err) {
		t.Errorf("send to a channel the session knows it lost: %v; want TDLib's own 400 Have no write access", err)
	}
	f.w.LoseAccess(told, false)
	if _, err := f.c.SendDocument(f.ctx, told, remote, "token"); err != nil {
		t.Errorf("send once access is back: %v", err)
	}

	private := f.w.AddChat(tg.KindChannel, "not told", "alice")
	f.w.SetPrivate(private, true)
	tmp, err := f.c.SendDocument(f.ctx, private, remote, "token")
	if err != nil {
		t.Fatalf("send to a channel made private on the server alone: %v; want it made", err)
	}
	ups := collectUntil(t, f.c, func(u tg.Update) bool { _, ok := u.(tg.SendFailed); return ok })
	lost := slices.IndexFunc(ups, func(u tg.Update) bool { l, ok := u.(tg.ChatAccessLost); return ok && l.Chat == private })
	failed := ups[len(ups)-1].(tg.SendFailed)
	var te *tg.Error
	if lost < 0 || failed.OldMessageID != tmp.ID || !errors.As(failed.Err, &te) || te.Code != 400 || te.Message != "CHANNEL_PRIVATE" ||
		!tg.NoWriteAccess(failed.Err) {
		t.Errorf("the server's refusal: updates %v; want ChatAccessLost, then message %d failed with 400 CHANNEL_PRIVATE", ups, tmp.ID)
	}
	if _, err := f.c.SendDocument(f.ctx, private, remote, "token"); !noWrite(err) {
		t.Errorf("next send, once the session took itself as having left: %v; want TDLib's own refusal", err)
	}
	if n := len(f.w.Messages(private)); n != 0 {
		t.Errorf("%d messages landed in a channel the account was removed from", n)
	}
	f.w.SetPrivate(private, false)
	if _, err := f.c.SendDocument(f.ctx, private, remote, "token"); err != nil {
		t.Errorf("send once the channel is accessible again: %v", err)
	}
}

// A send whose request left the client lands after the client closed
// (HoldInFlight): the closed session hears nothing, and another session
// that follows the chat is told of the new post as of any other.
func TestSendInFlightLandsAfterItsClientClosed(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	bob := f.w.Client("bob")
	defer bob.Close()
	if err := bob.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := bob.OpenChat(f.ctx, f.dest); err != nil {
		t.Fatal(err)
	}
	f.w.HoldInFlight(true)
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "late"); err != nil {
		t.Fatal(err)
	}
	f.w.HoldInFlight(false)
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.w.Messages(f.dest); len(got) != 0 {
		t.Fatalf("the destination holds %+v before the send landed", got)
	}
	if n := f.w.LandInFlight(); n != 1 {
		t.Fatalf("LandInFlight landed %d requests, want 1", n)
	}
	truth := f.w.Messages(f.dest)
	if len(truth) != 1 || truth[0].Caption != "late" {
		t.Fatalf("destination = %+v; want the late send", truth)
	}
	got := next[tg.NewMessage](t, bob, func(u tg.NewMessage) bool { return u.Message.ChatID == f.dest })
	if got.Message.ID != truth[0].ID || got.Message.Caption != "late" || got.Message.Document == nil {
		t.Fatalf("bob was told of %+v; want the late send %d", got.Message, truth[0].ID)
	}
}

// A send made while the account is offline is accepted (the temporary
// message) and stays pending: TDLib sends it once its connection is back.
// Nothing lands in the destination, and no outcome comes, until the
// reconnect; then it lands as any send does.
func TestSendWhileOfflineLandsAfterTheReconnect(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendLatency: 10 * time.Millisecond})
	f.w.Disconnect("alice", 0)
	tmp, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "offline")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if truth := f.w.Messages(f.dest); len(truth) != 0 {
		t.Fatalf("the destination holds %+v while the sender is offline, want nothing yet", truth)
	}
	f.w.Reconnect("alice")
	ok := next[tg.SendSucceeded](t, f.c, func(u tg.SendSucceeded) bool { return u.OldMessageID == tmp.ID })
	if truth := f.w.Messages(f.dest); len(truth) != 1 || truth[0].ID != ok.Message.ID {
		t.Fatalf("after the reconnect the destination holds %+v, want the send's message %d", truth, ok.Message.ID)
	}
}
