package tg_test

import (
	"errors"
	"testing"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// A refused send leaves a failed local message in the session, as TDLib
// keeps one (messageSendingStateFailed) under a new id; Send deletes it
// when it gives the send up, so failures do not pile up in the chat.
func TestSendDeletesItsFailedLocalMessage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := tgsim.NewWorld(tgsim.Config{Seed: 3, SendFailRate: 1, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	src := w.AddChat(tg.KindChannel, "source", "a")
	dest := w.AddChat(tg.KindChannel, "mirror", "a")
	posted := w.Post(src, 0, tgsim.Post{FileName: "d.zip", Data: []byte("PK")})
	c := w.Client("a")
	t.Cleanup(func() { _ = c.Close() })
	if err := c.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := c.GetMessage(ctx, src, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	s := tg.NewSession(c, func(tg.Update) {})
	for range 3 {
		_, err := s.Send(ctx, dest, m.Document.File.RemoteID, "d.zip")
		var te *tg.Error
		if !errors.As(err, &te) || te.Code != 500 {
			t.Fatalf("send = %v, want the injected 500", err)
		}
	}
	if got := c.FailedMessages(dest); len(got) != 0 {
		t.Errorf("failed local messages left in the destination: %v", got)
	}
	if got := w.FailedMessages("a"); got != 0 {
		t.Errorf("%d failed local messages left in the account's sessions", got)
	}
	if n := w.Calls("a")[tg.MethodDeleteMessages]; n != 3 {
		t.Errorf("deleteMessages called %d times, want 3 (one per failed send)", n)
	}
}
