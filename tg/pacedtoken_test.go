package tg_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// entered tells when a GetChatHistory reaches the client.
type entered struct {
	tg.Client
	in chan struct{}
}

func (c entered) GetChatHistory(ctx context.Context, chat tg.ChatID, from tg.MessageID, limit int) ([]tg.Message, error) {
	select {
	case c.in <- struct{}{}:
	default:
	}
	return c.Client.GetChatHistory(ctx, chat, from, limit)
}

// A request that waited for a token of the account's budget while another
// request met a 429 does not go inside the wait: the pause is looked at
// again once the token comes.
func TestRequestWaitingForATokenHonoursAPauseThatBeganMeanwhile(t *testing.T) {
	t.Parallel()
	w := tgsim.NewWorld(tgsim.Config{Seed: 1, Latency: 200 * time.Millisecond})
	w.AddAccount("a", false)
	chat := w.AddChat(tg.KindChannel, "c", "a")
	c := w.Client("a")
	defer c.Close()
	ec := entered{Client: c, in: make(chan struct{}, 1)}
	p := tg.NewPaced(ec, tg.PacedConfig{Account: "a", Rate: 1, Burst: 1, MaxFloodWaits: 1}, tg.NewMetrics(prometheus.NewRegistry()))
	ctx := tg.WithoutFloodWaits(t.Context())
	if err := p.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the bucket refills
	w.InjectFloodWait("a", tg.MethodGetChatHistory, time.Hour, 1)
	first := make(chan error, 1)
	go func() {
		_, err := p.GetChatHistory(ctx, chat, 0, 10)
		first <- err
	}()
	<-ec.in // the first took the token and is on its way
	_, err := p.GetChatHistory(ctx, chat, 0, 10)
	if ferr := <-first; !isFloodWait(ferr, 59*time.Minute) {
		t.Fatalf("first GetChatHistory = %v, want the injected flood wait", ferr)
	}
	if !isFloodWait(err, time.Minute) {
		t.Errorf("second GetChatHistory = %v, want the flood wait the first met", err)
	}
	if b := w.FloodWaitBreaches("a"); len(b) != 0 {
		t.Errorf("requests made inside a known flood wait: %+v", b)
	}
}
