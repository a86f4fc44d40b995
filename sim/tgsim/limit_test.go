package tgsim

import (
	"errors"
	"testing"
	"time"

	"stashd/tg"
)

// Telegram's per-account request limit: server requests beyond it fail with
// 429 and a retry-after until tokens come back; local requests and other
// accounts are not limited. TDLib sits out nothing here (FloodSitOut < 0),
// as for waits past its limit: the world's clock is the test's.
func TestLimitRequests(t *testing.T) {
	f := newFixture(t, Config{FloodSitOut: -1})
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

// TDLib sits out a wait the request limit asks for: the request is sent
// again once the wait has passed and answers late, the client sees no
// 429; the world counts the refusal and the wait sat out, not a second
// request of the client's.
func TestLimitedRequestIsSatOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Now: time.Now})
	f.w.LimitRequests("alice", 1, 1)
	search := func() error {
		_, err := f.c.SearchChatMessages(f.ctx, tg.Search{Chat: f.chat, Limit: 10, Filter: tg.FilterDocument})
		return err
	}
	if err := search(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := search(); err != nil {
		t.Fatalf("request past the limit: %v; want it answered after TDLib sat out the wait", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("request past the limit answered after %s; want after the 1 s wait", took)
	}
	if got := f.w.RateLimited("alice"); got != 1 {
		t.Errorf("RateLimited = %d, want 1", got)
	}
	if got := f.w.FloodWaitsSatOut("alice"); got != 1 {
		t.Errorf("FloodWaitsSatOut = %d, want 1", got)
	}
	if got := f.w.Calls("alice")[tg.MethodSearchChatMessages]; got != 2 {
		t.Errorf("searchChatMessages counted %d, want 2 (TDLib's re-send is not the client's)", got)
	}
	if b := f.w.FloodWaitBreaches("alice"); len(b) != 0 {
		t.Errorf("breaches %v; the client saw no wait", b)
	}
}

// TDLib sits out the waits of one request up to its limit in total. Here
// the limit is one wait: three requests refused at once each sit out
// their 2 s wait and are sent again; the first of them is admitted, and
// the other two, refused again, reach the client as 429 "Too Many
// Requests: retry after 2".
func TestSitOutEndsAtTDLibsLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Now: time.Now, FloodSitOut: 2 * time.Second})
	f.w.LimitRequests("alice", 0.5, 1)
	search := func() error {
		_, err := f.c.SearchChatMessages(f.ctx, tg.Search{Chat: f.chat, Limit: 10, Filter: tg.FilterDocument})
		return err
	}
	if err := search(); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- search() }()
	}
	var ok, refused int
	for range 3 {
		err := <-errs
		var te *tg.Error
		switch {
		case err == nil:
			ok++
		case errors.As(err, &te) && te.Code == 429 && te.Message == "Too Many Requests: retry after 2":
			refused++
		default:
			t.Errorf("request: %v; want an answer, or TDLib's 429 past its limit", err)
		}
	}
	if ok != 1 || refused != 2 {
		t.Errorf("%d answered, %d refused; want 1 answered after the wait and 2 refused past TDLib's limit", ok, refused)
	}
	if got := f.w.FloodWaitsSatOut("alice"); got != 3 {
		t.Errorf("FloodWaitsSatOut = %d, want 3 (each request's first wait)", got)
	}
}
