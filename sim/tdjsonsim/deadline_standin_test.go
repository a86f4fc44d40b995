//go:build libtdjson

package tdjsonsim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// A reply TDLib writes after its caller stopped waiting (the caller's own
// deadline, below go-tdlib's 60-second catcher) lands in go-tdlib's
// catcher, which still waits for it: nothing panics, the caller got a
// clean context error, and the next request gets its own answer, not the
// late one.
func TestLateReplyAfterTheCallersDeadline(t *testing.T) {
	// Every simulated call takes a second.
	world := tgsim.NewWorld(tgsim.Config{Seed: 1, Latency: time.Second})
	world.AddAccount("acct1", false)
	ctx, c := standinClient(t, world)

	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := c.GetChat(short, -1001)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, tg.ErrRequestTimeout) {
		t.Fatalf("request past the caller's deadline: %v, want context.DeadlineExceeded", err)
	}
	// The late reply (a 400 for the unknown chat) lands meanwhile; the
	// next request is answered with its own reply.
	time.Sleep(1500 * time.Millisecond)
	me, err := c.GetMe(ctx)
	if err != nil || me.ID == 0 {
		t.Fatalf("getMe after a late reply = %+v, %v; want this account's user", me, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close after a late reply: %v", err)
	}
}
