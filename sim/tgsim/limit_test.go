package tgsim

import (
	"testing"
	"time"

	"stashd/tg"
)

// Telegram's per-account request limit: server requests beyond it fail with
// 429 and a retry-after until tokens come back; local requests and other
// accounts are not limited.
func TestLimitRequests(t *testing.T) {
	f := newFixture(t, Config{})
	f.w.AddAccount("bob", false)
	f.w.Join("bob", f.chat)
	bob := f.w.Client("bob")
	t.Cleanup(func() { bob.Close() })
	if err := bob.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.w.LimitRequests("alice", 2, 2)
	search := func(c *Client) error {
		_, err := c.SearchChatMessages(f.ctx, tg.Search{Chat: f.chat, Limit: 10, Filter: tg.FilterDocument})
		return err
	}
	for i := range 2 {
		if err := search(f.c); err != nil {
			t.Fatalf("request %d within the burst: %v", i+1, err)
		}
	}
	err := search(f.c)
	d, ok := tg.FloodWait(err)
	if !ok || d < time.Second {
		t.Fatalf("request beyond the limit: %v (flood wait %v %v), want 429 retry after >= 1s", err, d, ok)
	}
	if tg.Classify(err) != tg.ClassFloodWait {
		t.Errorf("429 classified %v", tg.Classify(err))
	}
	if _, err := f.c.GetChat(f.ctx, f.chat); err != nil {
		t.Errorf("getChat is local and not limited: %v", err)
	}
	for i := range 5 {
		if err := search(bob); err != nil {
			t.Fatalf("bob's request %d: another account's limit applied: %v", i+1, err)
		}
	}
	f.clk.Advance(time.Second)
	for i := range 2 {
		if err := search(f.c); err != nil {
			t.Fatalf("request %d a second later: %v", i+1, err)
		}
	}
	if err := search(f.c); err == nil {
		t.Fatal("the bucket refilled beyond its rate")
	}
	if got := f.w.RateLimited("alice"); got != 2 {
		t.Errorf("RateLimited = %d, want 2", got)
	}
	if got := f.w.Calls("alice")[tg.MethodSearchChatMessages]; got != 6 {
		t.Errorf("searchChatMessages counted %d, want 6 (refused ones included)", got)
	}
	f.w.LimitRequests("alice", 0, 0)
	for range 10 {
		if err := search(f.c); err != nil {
			t.Fatalf("limit removed, still refused: %v", err)
		}
	}
}
