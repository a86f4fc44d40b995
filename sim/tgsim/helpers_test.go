package tgsim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"stashd/tg"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait for an asynchronous outcome; it is generous
// because the machine is shared, and a passing test never waits for it.
const waitTimeout = 10 * time.Second

// clock is a manual clock for Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a world with one account ("alice") in one channel, and a
// started client whose chats are loaded.
type fixture struct {
	w     *World
	clk   *clock
	chat  tg.ChatID
	c     *Client
	ctx   context.Context
	files string
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	clk := newClock()
	if cfg.Now == nil {
		cfg.Now = clk.Now
	}
	if cfg.FilesDir == "" {
		cfg.FilesDir = t.TempDir()
	}
	w := NewWorld(cfg)
	w.AddAccount("alice", false)
	chat := w.AddChat(tg.KindChannel, "source", "alice")
	c := w.Client("alice")
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()
	if err := c.LoadChats(ctx); err != nil {
		t.Fatalf("LoadChats: %v", err)
	}
	return &fixture{w: w, clk: clk, chat: chat, c: c, ctx: ctx, files: cfg.FilesDir}
}

// next returns the next update of c that satisfies match, discarding the
// others, or fails the test after waitTimeout.
func next[U tg.Update](t *testing.T, c *Client, match func(U) bool) U {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case u, ok := <-c.Updates():
			if !ok {
				var zero U
				t.Fatalf("update stream closed while waiting for %T", zero)
			}
			if v, ok := u.(U); ok && (match == nil || match(v)) {
				return v
			}
		case <-timeout:
			var zero U
			t.Fatalf("no %T within %s", zero, waitTimeout)
		}
	}
}

// collectUntil returns every update of c up to and including the first one
// for which stop is true.
func collectUntil(t *testing.T, c *Client, stop func(tg.Update) bool) []tg.Update {
	t.Helper()
	var got []tg.Update
	timeout := time.After(waitTimeout)
	for {
		select {
		case u, ok := <-c.Updates():
			if !ok {
				t.Fatalf("update stream closed after %d updates", len(got))
			}
			got = append(got, u)
			if stop(u) {
				return got
			}
		case <-timeout:
			t.Fatalf("stop condition not met within %s; got %v", waitTimeout, got)
		}
	}
}

// newMessages returns the ids of the updateNewMessage of chat in us.
func newMessages(us []tg.Update, chat tg.ChatID) []tg.MessageID {
	var ids []tg.MessageID
	for _, u := range us {
		if nm, ok := u.(tg.NewMessage); ok && nm.Message.ChatID == chat {
			ids = append(ids, nm.Message.ID)
		}
	}
	return ids
}

func isLastMessage(chat tg.ChatID, id tg.MessageID) func(tg.Update) bool {
	return func(u tg.Update) bool {
		lm, ok := u.(tg.ChatLastMessage)
		return ok && lm.Chat == chat && lm.LastMessageID == id
	}
}

func doc(name string, size int) Post {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + len(name))
	}
	return Post{FileName: name, Data: data}
}

func postN(w *World, chat tg.ChatID, thread int64, n int, prefix string) []tg.Message {
	var out []tg.Message
	for i := range n {
		out = append(out, w.Post(chat, thread, Post{Text: fmt.Sprintf("%s %d", prefix, i)}))
	}
	return out
}
