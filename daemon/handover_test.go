package daemon_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// An account that may not write to a destination (TDLib: 400 "Have no
// write access to the chat") hands its deliveries there to another account
// that can see the files; each package arrives once, sent by that account.
func TestAccountWithoutWriteAccessHandsDeliveriesOver(t *testing.T) {
	t.Run("ingesting account", func(t *testing.T) { handOverRun(t, 0) })
	// With send budgets the deliveries spread over the accounts: the one
	// refused is not chosen again once refused.
	t.Run("spread over budgets", func(t *testing.T) { handOverRun(t, 6000) })
}

func handOverRun(t *testing.T, sendRate float64) {
	ctx := t.Context()
	st := openStore(t, 16)
	pr := newPair(t, 5, "a", "b") // b sees the files
	world, src, dest := pr.world, pr.src, pr.dest
	world.SetWriteAccess("a", dest, false)

	cfg := daemon.Config{
		Accounts:     pr.accounts(),
		Destinations: []tg.ChatID{dest}, Workers: 2, DrainTimeout: 10 * time.Second, SendRate: sendRate,
		Ingest:   ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
		Delivery: ingest.DeliveryConfig{Interval: 100 * time.Millisecond},
	}
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	var posted []tg.Message
	for i := range 3 {
		name := fmt.Sprintf("p%d.tar", i)
		m := world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
		posted = append(posted, m)
	}
	for _, m := range posted {
		waitHandled(t, st, m.Key())
	}
	// b's window loop sends what was handed to it; bounded poll.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		for _, m := range world.Messages(dest) {
			if m.Document != nil {
				n++
			}
		}
		if n >= len(posted) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d packages reached the destination", n, len(posted))
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.Shutdown(context.Background())

	count := map[string]int{}
	for _, m := range world.Messages(dest) {
		if m.Document != nil {
			count[m.Document.File.UniqueID]++
		}
	}
	for _, m := range posted {
		if count[m.Document.File.UniqueID] != 1 {
			t.Errorf("%s is in the destination %d times, want once", m.Document.FileName, count[m.Document.File.UniqueID])
		}
	}
	for _, s := range world.Sends() {
		if s.Chat == dest && s.Account != "b" {
			t.Errorf("account %s's send to the destination was accepted; only b may write there", s.Account)
		}
	}
	var intents int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE state <> 'sent'`).Scan(&intents); err != nil {
		t.Fatal(err)
	}
	if intents != 0 {
		t.Errorf("%d deliveries not recorded as sent", intents)
	}
}
