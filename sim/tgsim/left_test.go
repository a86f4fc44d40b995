package tgsim

import (
	"testing"
	"time"

	"stashd/tg"
)

// TDLib reports that the account left a supergroup or channel once
// (updateSupergroup, status left), however many chat lists the session
// loads; a basic group's status comes in updateBasicGroup, which the port
// does not carry, so it reports nothing there.
func TestLeftChatReportedOnce(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{Seed: 1, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	w.AddAccount("b", false)
	channel := w.AddChat(tg.KindChannel, "channel", "a", "b")
	group := w.AddChat(tg.KindBasicGroup, "group", "a", "b")
	w.LoseAccess(channel, true)
	w.RemoveMember("a", group, true)
	ctx := t.Context()
	c := w.Client("a")
	t.Cleanup(func() { _ = c.Close() })
	for range 2 {
		if err := c.LoadChatList(ctx, false); err != nil {
			t.Fatal(err)
		}
		if err := c.LoadChatList(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	reports := map[tg.ChatID]int{}
	for deadline := time.After(200 * time.Millisecond); ; {
		select {
		case u := <-c.Updates():
			if l, ok := u.(tg.ChatAccessLost); ok {
				reports[l.Chat]++
			}
			continue
		case <-deadline:
		}
		break
	}
	if reports[channel] != 1 || reports[group] != 0 {
		t.Errorf("left reports %v; want the channel once, the basic group never", reports)
	}
}
