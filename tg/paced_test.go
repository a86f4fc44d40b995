package tg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/tg"
	"stashd/tg/tgsim"
)

// A 429 pauses every request of its account and of no other.
func TestFloodWaitPausesOnlyItsAccount(t *testing.T) {
	t.Parallel()
	w := tgsim.NewWorld(tgsim.Config{Seed: 1})
	w.AddAccount("a", false)
	w.AddAccount("b", false)
	chat := w.AddChat(tg.KindChannel, "c", "a", "b")
	reg := prometheus.NewRegistry()
	m := tg.NewMetrics(reg)
	ca, cb := w.Client("a"), w.Client("b")
	defer ca.Close()
	defer cb.Close()
	pa := tg.NewPaced(ca, tg.PacedConfig{Account: "a", MaxFloodWaits: 1}, m)
	pb := tg.NewPaced(cb, tg.PacedConfig{Account: "b", MaxFloodWaits: 1}, m)
	ctx := t.Context()
	for _, p := range []*tg.Paced{pa, pb} {
		if err := p.LoadChats(ctx); err != nil {
			t.Fatal(err)
		}
	}

	w.InjectFloodWait("a", tg.MethodGetChat, time.Hour, 1)
	_, err := pa.GetChat(ctx, chat)
	if d, ok := tg.FloodWait(err); !ok || d != time.Hour {
		t.Fatalf("GetChat = %v, want a one-hour flood wait", err)
	}
	if until := pa.PausedUntil(); time.Until(until) < 59*time.Minute {
		t.Fatalf("account a paused until %v, want about an hour", until)
	}

	// a's next request waits (here: until its context gives up) without
	// reaching Telegram.
	before := w.Calls("a")[tg.MethodGetChat]
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := pa.GetChat(short, chat); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("paused account's request = %v, want it held until its deadline", err)
	}
	if got := w.Calls("a")[tg.MethodGetChat]; got != before {
		t.Errorf("paused account made %d request(s) during the pause", got-before)
	}

	// b is not affected.
	if !pb.PausedUntil().IsZero() {
		t.Fatal("account b paused by account a's flood wait")
	}
	if _, err := pb.GetChat(ctx, chat); err != nil {
		t.Fatalf("account b: %v", err)
	}
	if got := testutil.ToFloat64(m.FloodWaitSeconds("a")); got != 3600 {
		t.Errorf("flood wait seconds of a = %v, want 3600", got)
	}
	if got := testutil.ToFloat64(m.FloodWaitSeconds("b")); got != 0 {
		t.Errorf("flood wait seconds of b = %v, want 0", got)
	}
}
