package tg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// A send refused by one chat's send limit (429 in updateMessageSendFailed)
// pauses the sends to that chat only: a send to another chat and a
// history request (catch-up) of the same account go at once, and a send
// to the flooded chat fails at once with the rest of its wait.
func TestChatFloodPausesOnlySendsToThatChat(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := tgsim.NewWorld(tgsim.Config{Seed: 4, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	src := w.AddChat(tg.KindChannel, "source", "a")
	flooded := w.AddChat(tg.KindChannel, "flooded", "a")
	other := w.AddChat(tg.KindChannel, "other", "a")
	w.LimitChatSends(flooded, 1.0/120, 1) // one send, then two minutes
	posted := w.Post(src, 0, tgsim.Post{FileName: "d.zip", Data: []byte("PK")})
	c := w.Client("a")
	t.Cleanup(func() { _ = c.Close() })
	m := tg.NewMetrics(prometheus.NewRegistry())
	s := tg.NewSession(tg.NewPaced(c, tg.PacedConfig{Account: "a"}, m), func(tg.Update) {})
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
	_, err = s.Send(ctx, flooded, remote, "2")
	if d, ok := tg.FloodWait(err); !ok || d < time.Minute {
		t.Fatalf("second send to the limited chat = %v, want a 429 of about two minutes", err)
	}

	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.Send(quick, other, remote, "3"); err != nil {
		t.Errorf("send to another chat during the flood wait: %v", err)
	}
	if _, err := s.GetChatHistory(quick, src, 0, 10); err != nil {
		t.Errorf("history request during the flood wait: %v", err)
	}
	start := time.Now()
	_, err = s.Send(quick, flooded, remote, "4")
	if d, ok := tg.FloodWait(err); !ok || !errors.Is(err, tg.ErrChatFloodWait) || d < time.Minute || time.Since(start) > time.Second {
		t.Errorf("send to the flooded chat during its wait = %v after %s, want ErrChatFloodWait at once", err, time.Since(start))
	}
	if n := w.ChatFlooded(flooded); n != 1 {
		t.Errorf("the chat refused %d sends, want 1 (the paused one never reached it)", n)
	}
	if got := testutil.ToFloat64(m.FloodWaitSeconds("a")); got < 60 {
		t.Errorf("flood-wait seconds counted %v, want the wait", got)
	}
}
