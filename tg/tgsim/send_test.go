package tgsim

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

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
	// Once the only message carrying the file is gone, nobody can send it.
	f.w.Delete(f.chat, f.src.ID)
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "x"); tg.Classify(err) != tg.ClassPermanent {
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
