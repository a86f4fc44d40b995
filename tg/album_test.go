package tg_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// albumWorld is account a with a source of n documents and two
// destinations, the first limited to one send every two minutes; its
// session's request metrics go to reg.
func albumWorld(t *testing.T, cfg tgsim.Config, n int, reg prometheus.Registerer) (*tgsim.World, *tg.Session, []tg.AlbumItem, tg.ChatID, tg.ChatID) {
	t.Helper()
	cfg.FilesDir = t.TempDir()
	w := tgsim.NewWorld(cfg)
	w.AddAccount("a", false)
	src := w.AddChat(tg.KindChannel, "source", "a")
	limited := w.AddChat(tg.KindChannel, "limited", "a")
	open := w.AddChat(tg.KindChannel, "open", "a")
	w.LimitChatSends(limited, 1.0/120, 1)
	c := w.Client("a")
	t.Cleanup(func() { _ = c.Close() })
	s := tg.NewSession(tg.NewPaced(c, tg.PacedConfig{Account: "a"}, tg.NewMetrics(reg)), func(tg.Update) {})
	if err := s.LoadChats(t.Context()); err != nil {
		t.Fatal(err)
	}
	items := make([]tg.AlbumItem, n)
	for i := range items {
		posted := w.Post(src, 0, tgsim.Post{FileName: fmt.Sprintf("x.part%d.rar", i+1), Data: fmt.Appendf(nil, "Rar!%d", i)})
		m, err := s.GetMessage(t.Context(), src, posted.ID)
		if err != nil {
			t.Fatal(err)
		}
		items[i] = tg.AlbumItem{RemoteFileID: m.Document.File.RemoteID, Caption: fmt.Sprintf("part %d", i+1)}
	}
	return w, s, items, limited, open
}

// An album is one request; SendAlbumTo waits for every message's outcome
// and returns each message as the server has it.
func TestSendAlbumWaitsForEveryMessage(t *testing.T) {
	t.Parallel()
	w, s, items, _, open := albumWorld(t, tgsim.Config{Seed: 1}, 4, prometheus.NewRegistry())
	res, err := s.SendAlbumTo(t.Context(), open, 0, items)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d results for 4 documents", len(res))
	}
	for i, r := range res {
		if r.Err != nil || !r.Message.ID.IsServer() || r.Message.Caption != items[i].Caption || r.Message.AlbumID == 0 {
			t.Errorf("result %d = %+v; want the server message captioned %q in an album", i, r, items[i].Caption)
		}
	}
	if got := w.Calls("a")[tg.MethodSendMessageAlbum]; got != 1 {
		t.Errorf("%d sendMessageAlbum requests, want 1", got)
	}
}

// A 429 from the chat's send limit refuses the whole album: every message
// fails, the chat is paused, and the next album there fails at once
// without a request.
func TestSendAlbumChatFloodFailsEveryMessageAndPausesTheChat(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	w, s, items, limited, open := albumWorld(t, tgsim.Config{Seed: 2}, 3, reg)
	ctx := t.Context()
	if _, err := s.SendAlbumTo(ctx, limited, 0, items); err != nil {
		t.Fatalf("first album to the limited chat: %v", err)
	}
	res, err := s.SendAlbumTo(ctx, limited, 0, items)
	if err != nil {
		t.Fatalf("second album: %v, want per-message refusals", err)
	}
	for i, r := range res {
		if d, ok := tg.FloodWait(r.Err); !ok || d < time.Minute || !errors.Is(r.Err, tg.ErrSendRefused) {
			t.Errorf("message %d of the refused album: %v, want a refused send with a 429 of about two minutes", i, r.Err)
		}
	}
	if n := len(w.Messages(limited)); n != 3 {
		t.Errorf("limited chat holds %d messages, want the first album's 3", n)
	}
	// One refused request is one flood wait in the metrics, not one per
	// message.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch v := m.GetCounter().GetValue(); mf.GetName() {
			case "stashd_telegram_flood_wait_seconds_total":
				if d, _ := tg.FloodWait(res[0].Err); v != d.Seconds() {
					t.Errorf("flood wait counted %v s, want the one 429's %v", v, d.Seconds())
				}
			case "stashd_telegram_requests_total":
				for _, l := range m.GetLabel() {
					if l.GetName() == "result" && l.GetValue() == "flood_wait" && v != 1 {
						t.Errorf("%v requests counted as flood waits, want 1", v)
					}
				}
			}
		}
	}
	// The refused messages stay in the session, failed, until deleted:
	// all three in one request.
	if n := w.FailedMessages("a"); n != 0 {
		t.Errorf("%d failed messages left in the session, want none", n)
	}
	if n := w.Calls("a")[tg.MethodDeleteMessages]; n != 1 {
		t.Errorf("%d deleteMessages requests for the refused album, want 1", n)
	}
	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	before := w.Calls("a")[tg.MethodSendMessageAlbum]
	if _, err := s.SendAlbumTo(quick, limited, 0, items); !errors.Is(err, tg.ErrChatFloodWait) {
		t.Errorf("album to the paused chat: %v, want ErrChatFloodWait at once", err)
	}
	if got := w.Calls("a")[tg.MethodSendMessageAlbum] - before; got != 0 {
		t.Errorf("the paused album made %d requests, want none", got)
	}
	if _, err := s.SendAlbumTo(quick, open, 0, items); err != nil {
		t.Errorf("album to another chat during the pause: %v", err)
	}
}

// A request TDLib refuses makes no message: ErrSendRefused, nothing sent.
func TestSendAlbumRefusedRequest(t *testing.T) {
	t.Parallel()
	w, s, items, _, open := albumWorld(t, tgsim.Config{Seed: 3}, 11, prometheus.NewRegistry())
	if _, err := s.SendAlbumTo(t.Context(), open, 0, items); !errors.Is(err, tg.ErrSendRefused) || tg.Classify(err) != tg.ClassPermanent {
		t.Fatalf("album of 11: %v, want a permanent refusal", err)
	}
	if n := len(w.Sends()); n != 0 {
		t.Errorf("%d messages sent, want none", n)
	}
}
