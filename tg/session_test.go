package tg_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"stashd/tg"
)

// sameTempIDClient gives every send the same temporary id, as TDLib may for
// sends to different chats, and reports outcomes only when told to.
type sameTempIDClient struct {
	tg.Client
	updates chan tg.Update
	sent    chan tg.ChatID
}

func (c *sameTempIDClient) Updates() <-chan tg.Update { return c.updates }

func (c *sameTempIDClient) SendDocument(_ context.Context, chat tg.ChatID, _, _ string) (tg.Message, error) {
	c.sent <- chat
	return tg.Message{ID: 1, ChatID: chat}, nil
}

// Sends to two chats whose temporary ids collide each get their own
// outcome, whatever order the outcomes arrive in.
func TestSessionCorrelatesSendsByChatAndTemporaryID(t *testing.T) {
	t.Parallel()
	c := &sameTempIDClient{updates: make(chan tg.Update), sent: make(chan tg.ChatID, 2)}
	s := tg.NewSession(c, func(tg.Update) {})
	defer func() { close(c.updates); <-s.Done() }()

	const a, b = tg.ChatID(-1), tg.ChatID(-2)
	got := map[tg.ChatID]tg.Message{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, chat := range []tg.ChatID{a, b} {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			m, err := s.Send(ctx, chat, "remote", "caption")
			if err != nil {
				t.Errorf("send to %d: %v", chat, err)
			}
			mu.Lock()
			got[chat] = m
			mu.Unlock()
		})
	}
	<-c.sent
	<-c.sent
	// b's outcome first, then a's; both name temporary id 1.
	c.updates <- tg.SendSucceeded{OldMessageID: 1, Message: tg.Message{ChatID: b, ID: tg.MessageIDFromServer(20)}}
	c.updates <- tg.SendSucceeded{OldMessageID: 1, Message: tg.Message{ChatID: a, ID: tg.MessageIDFromServer(10)}}
	wg.Wait()
	if got[a].ChatID != a || got[a].ID.ServerID() != 10 || got[b].ChatID != b || got[b].ID.ServerID() != 20 {
		t.Errorf("outcomes crossed: a got %+v, b got %+v", got[a], got[b])
	}
}
