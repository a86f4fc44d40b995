package tg_test

import (
	"context"
	"testing"
	"time"

	"stashd/tg"
)

// lastClient answers getChat with a fixed last message, as TDLib does from
// its memory, and passes on the updates it is given.
type lastClient struct {
	tg.Client
	updates chan tg.Update
	last    tg.MessageID
}

func (c *lastClient) Updates() <-chan tg.Update { return c.updates }

func (c *lastClient) GetChat(_ context.Context, chat tg.ChatID) (tg.Chat, error) {
	return tg.Chat{ID: chat, LastMessageID: c.last}, nil
}

// KnownLast is the newest of getChat's last message and what updates told
// of: a new message, a chat's last message, a permanent deletion (the
// message was posted), never a message being sent or a cache eviction.
func TestKnownLastLearnsFromUpdates(t *testing.T) {
	t.Parallel()
	const chat, other = tg.ChatID(-1), tg.ChatID(-2)
	id := tg.MessageIDFromServer
	c := &lastClient{updates: make(chan tg.Update), last: id(5)}
	s := tg.NewSession(c, func(tg.Update) {})
	defer func() { close(c.updates); <-s.Done() }()
	want := func(what string, w tg.MessageID) {
		t.Helper()
		got, err := s.KnownLast(t.Context(), chat)
		if err != nil || got != w {
			t.Fatalf("%s: KnownLast = %d (%v), want %d", what, got.ServerID(), err, w.ServerID())
		}
	}
	// An update handed to the pump is learned before the next one is
	// taken: one more update, to another chat, makes sure of it.
	send := func(u tg.Update) {
		t.Helper()
		for _, u := range []tg.Update{u, tg.ChatLastMessage{Chat: other, LastMessageID: id(1)}} {
			select {
			case c.updates <- u:
			case <-time.After(10 * time.Second):
				t.Fatal("the session took no update")
			}
		}
	}
	want("getChat alone", id(5))
	send(tg.NewMessage{Message: tg.Message{ChatID: chat, ID: id(7)}})
	want("after a new message", id(7))
	send(tg.NewMessage{Message: tg.Message{ChatID: chat, ID: id(7) + 1}}) // a send under way: a local id
	want("after a pending send", id(7))
	send(tg.MessagesDeleted{Chat: chat, IDs: []tg.MessageID{id(9)}, FromCache: true})
	want("after a cache eviction", id(7))
	send(tg.MessagesDeleted{Chat: chat, IDs: []tg.MessageID{id(8), id(9)}, IsPermanent: true})
	want("after a deletion", id(9))
	send(tg.ChatLastMessage{Chat: chat, LastMessageID: id(12)})
	want("after a last message update", id(12))
	c.last = id(20)
	want("getChat newer than the updates", id(20))
}
