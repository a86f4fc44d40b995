package tg_test

import (
	"errors"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// A 429 answering a request is told to PacedConfig.OnPause (a send's as
// holding only sends), and a pause restored into a new Paced on another
// client of the account holds its requests as the 429 did: none reaches
// Telegram before the wait's end.
func TestPacedPauseIsToldAndRestored(t *testing.T) {
	t.Parallel()
	ctx := tg.WithoutFloodWaits(t.Context())
	w := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	src := w.AddChat(tg.KindChannel, "source", "a")
	type told struct {
		send bool
		d    time.Duration
	}
	var got []told
	c := w.Client("a")
	t.Cleanup(func() { _ = c.Close() })
	p := tg.NewPaced(c, tg.PacedConfig{Account: "a", OnPause: func(send bool, d time.Duration) { got = append(got, told{send, d}) }}, nil)
	if err := p.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	w.InjectFloodWait("a", tg.MethodGetChatHistory, time.Hour, 1)
	if _, err := p.GetChatHistory(ctx, src, 0, 10); !errors.As(err, new(*tg.FloodWaitError)) {
		t.Fatalf("history request = %v, want the injected flood wait", err)
	}
	p.Pause(tg.MethodSendMessage, 2*time.Hour)
	if len(got) != 2 || got[0] != (told{false, time.Hour}) || got[1] != (told{true, 2 * time.Hour}) {
		t.Fatalf("OnPause was told %v; want the hour of every request, then two hours of the sends", got)
	}

	c2 := w.Client("a")
	t.Cleanup(func() { _ = c2.Close() })
	p2 := tg.NewPaced(c2, tg.PacedConfig{Account: "a"}, nil)
	p2.RestorePause(true, 2*time.Hour)
	if p2.PausedUntil().After(time.Now()) {
		t.Fatal("a restored pause of the sends pauses every request")
	}
	if d := time.Until(p2.SendPausedUntil()); d < time.Hour {
		t.Fatalf("restored pause of the sends ends in %v; want two hours", d)
	}
	p2.RestorePause(false, time.Hour)
	before := w.Calls("a")[tg.MethodLoadChats]
	if err := p2.LoadChats(ctx); !errors.As(err, new(*tg.FloodWaitError)) {
		t.Fatalf("request during a restored pause = %v, want a flood wait", err)
	}
	if n := w.Calls("a")[tg.MethodLoadChats]; n != before {
		t.Errorf("%d request(s) reached Telegram during a restored pause", n-before)
	}
}

// A send refused in updateMessageSendFailed with 429 is told to the
// session's RecordChatPauses hook, and the pause restored into a new
// session of the account holds its sends to that chat, and only those.
func TestChatPauseIsRecordedAndRestored(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := tgsim.NewWorld(tgsim.Config{Seed: 6, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	src := w.AddChat(tg.KindChannel, "source", "a")
	flooded := w.AddChat(tg.KindChannel, "flooded", "a")
	other := w.AddChat(tg.KindChannel, "other", "a")
	w.LimitChatSends(flooded, 1.0/120, 1) // one send, then two minutes
	posted := w.Post(src, 0, tgsim.Post{FileName: "d.zip", Data: []byte("PK")})
	c := w.Client("a")
	t.Cleanup(func() { _ = c.Close() })
	s := tg.NewSession(tg.NewPaced(c, tg.PacedConfig{Account: "a"}, nil), func(tg.Update) {})
	told := make(chan time.Duration, 1)
	s.RecordChatPauses(func(chat tg.ChatID, d time.Duration) {
		if chat == flooded {
			told <- d
		}
	})
	if err := s.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetMessage(ctx, src, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	remote := msg.Document.File.RemoteID
	if _, err := s.Send(ctx, flooded, remote, "1"); err != nil {
		t.Fatalf("first send to the limited chat: %v", err)
	}
	if _, err := s.Send(ctx, flooded, remote, "2"); !errors.Is(err, tg.ErrSendRefused) {
		t.Fatalf("second send to the limited chat = %v, want refused with 429", err)
	}
	var d time.Duration
	select {
	case d = <-told:
	case <-time.After(30 * time.Second):
		t.Fatal("the chat's pause was never told to the hook")
	}
	if d < time.Minute {
		t.Fatalf("the hook was told a pause of %v; want about two minutes", d)
	}

	c2 := w.Client("a")
	t.Cleanup(func() { _ = c2.Close() })
	s2 := tg.NewSession(tg.NewPaced(c2, tg.PacedConfig{Account: "a"}, nil), func(tg.Update) {})
	s2.RestoreChatPause(flooded, d)
	if err := s2.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Send(ctx, flooded, remote, "3"); !errors.Is(err, tg.ErrChatFloodWait) {
		t.Errorf("send to the chat during a restored pause = %v, want ErrChatFloodWait", err)
	}
	if n := w.ChatFlooded(flooded); n != 1 {
		t.Errorf("the chat refused %d sends, want 1 (the restored pause held the next)", n)
	}
	if _, err := s2.Send(ctx, other, remote, "4"); err != nil {
		t.Errorf("send to another chat during the restored pause: %v", err)
	}
}
