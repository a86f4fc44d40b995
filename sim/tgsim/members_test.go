package tgsim

import (
	"errors"
	"testing"
	"time"

	"stashd/tg"
)

// One account removed from a chat (RemoveMember) loses it as LoseAccess
// loses it for all: its session hears ChatAccessLost, still knows the
// chat locally, reads it from the server no more ("Can't access the
// chat") and refuses its sends there ("Have no write access to the
// chat"). Another member keeps reading and sending. Given back, the
// account reads and sends again.
func TestRemoveOneMember(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	remote := f.src.Document.File.RemoteID
	bob := f.w.Client("bob")
	t.Cleanup(func() { bob.Close() })
	if err := bob.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}

	f.w.RemoveMember("alice", f.dest, true)
	f.w.RemoveMember("alice", f.chat, true)
	next[tg.ChatAccessLost](t, f.c, func(u tg.ChatAccessLost) bool { return u.Chat == f.dest })
	if _, err := f.c.GetChat(f.ctx, f.dest); err != nil {
		t.Errorf("getChat of a chat the account was removed from: %v; want it known locally", err)
	}
	var te *tg.Error
	if _, err := f.c.SendDocument(f.ctx, f.dest, remote, "token"); !errors.As(err, &te) || te.Message != "Have no write access to the chat" || !tg.NoWriteAccess(err) {
		t.Errorf("send by the removed account: %v; want 400 Have no write access to the chat", err)
	}
	if _, err := f.c.GetMessage(f.ctx, f.chat, f.src.ID); !errors.Is(err, tg.ErrNoAccess) || !errors.As(err, &te) || te.Message != "Can't access the chat" {
		t.Errorf("read by the removed account: %v; want 400 Can't access the chat", err)
	}
	bobSrc, err := bob.GetMessage(f.ctx, f.chat, f.src.ID)
	if err != nil {
		t.Fatalf("read by a member still there: %v", err)
	}
	if _, err := bob.SendDocument(f.ctx, f.dest, bobSrc.Document.File.RemoteID, "token-bob"); err != nil {
		t.Errorf("send by a member still there: %v", err)
	}

	f.w.RemoveMember("alice", f.dest, false)
	f.w.RemoveMember("alice", f.chat, false)
	if _, err := f.c.GetMessage(f.ctx, f.chat, f.src.ID); err != nil {
		t.Errorf("read once given back: %v", err)
	}
	if _, err := f.c.SendDocument(f.ctx, f.dest, remote, "token"); err != nil {
		t.Errorf("send once given back: %v", err)
	}
}

// A send made before its account was banned from the destination reaches
// the server as a banned member's: it fails with 400
// USER_BANNED_IN_CHANNEL, which stashd takes for a refusal of the chat's
// posts (tg.NoWriteAccess), as CHANNEL_PRIVATE.
func TestSendOfABannedMemberRefusedByTheServer(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{SendLatency: 50 * time.Millisecond})
	tmp, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "token")
	if err != nil {
		t.Fatal(err)
	}
	f.w.BanMember("alice", f.dest, true)
	failed := next[tg.SendFailed](t, f.c, nil)
	var te *tg.Error
	if failed.OldMessageID != tmp.ID || !errors.As(failed.Err, &te) || te.Message != "USER_BANNED_IN_CHANNEL" ||
		!tg.NoWriteAccess(failed.Err) || !errors.Is(failed.Err, tg.ErrNoAccess) {
		t.Errorf("send in flight when banned: %+v; want 400 USER_BANNED_IN_CHANNEL, a refusal of the chat's posts", failed)
	}
}

// A member removed from a chat cannot download a file it saw only there:
// TDLib's download needs the file reference of a message the account can
// read, and its repair reads the message from the server, which answers
// "Can't access the chat" as for a chat every member lost. A member still
// there downloads it.
func TestRemovedMemberCannotDownloadTheChatsFiles(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{})
	bob := f.w.Client("bob")
	t.Cleanup(func() { bob.Close() })
	if err := bob.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	bobSrc, err := bob.GetMessage(f.ctx, f.chat, f.src.ID)
	if err != nil {
		t.Fatal(err)
	}

	f.w.RemoveMember("alice", f.chat, true)
	if _, err := f.c.DownloadFile(f.ctx, f.src.Document.File.ID); !errors.Is(err, tg.ErrNoAccess) {
		t.Errorf("download by the removed member: %v; want Can't access the chat", err)
	}
	if _, err := bob.DownloadFile(f.ctx, bobSrc.Document.File.ID); err != nil {
		t.Errorf("download by a member still there: %v", err)
	}
}
