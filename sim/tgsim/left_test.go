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

// TDLib reports the account a member of a supergroup or channel once
// (updateSupergroup), however many chat lists the session loads, and
// again only after a loss; a chat given back to its other members, or
// opened again, is no member's status for an account still removed
// from it.
func TestMemberStatusReportedOnceAndOnlyToAMember(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{Seed: 1, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	w.AddAccount("b", false)
	channel := w.AddChat(tg.KindChannel, "channel", "a", "b")
	other := w.AddChat(tg.KindChannel, "other", "a", "b")
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
	if held := heldReports(c); held[channel] != 1 || held[other] != 1 {
		t.Errorf("member reports at load %v; want each channel once", held)
	}
	w.RemoveMember("a", other, true)
	w.LoseAccess(other, true)
	w.LoseAccess(other, false) // b's access back; a still removed
	w.SetPrivate(other, true)
	w.SetPrivate(other, false)
	if held := heldReports(c); held[other] != 0 {
		t.Errorf("member reports to an account still removed %v; want none", held)
	}
	w.RemoveMember("a", other, false)
	if held := heldReports(c); held[other] != 1 {
		t.Errorf("member reports once the account is back %v; want one", held)
	}
}

// heldReports counts the ChatAccessHeld reports c's session receives
// until it has been quiet a while.
func heldReports(c *Client) map[tg.ChatID]int {
	reports := map[tg.ChatID]int{}
	for deadline := time.After(200 * time.Millisecond); ; {
		select {
		case u := <-c.Updates():
			if h, ok := u.(tg.ChatAccessHeld); ok {
				reports[h.Chat]++
			}
			continue
		case <-deadline:
		}
		break
	}
	return reports
}
