package tgsim

import (
	"testing"
	"time"

	"stashd/tg"
)

// TDLib reports that the account left a supergroup or channel once
// (updateSupergroup, status left), however many chat lists the session
// loads, and a basic group it was removed from the same way
// (updateBasicGroup, status banned); a private chat has no status.
func TestLeftChatReportedOnce(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{Seed: 1, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	w.AddAccount("b", false)
	channel := w.AddChat(tg.KindChannel, "channel", "a", "b")
	group := w.AddChat(tg.KindBasicGroup, "group", "a", "b")
	private := w.AddChat(tg.KindPrivate, "b", "a")
	w.LoseAccess(channel, true)
	w.RemoveMember("a", group, true)
	w.LoseAccess(private, true)
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
	if reports[channel] != 1 || reports[group] != 1 || reports[private] != 0 {
		t.Errorf("left reports %v; want the channel and the basic group once, the private chat never", reports)
	}
}

// TDLib reports the account a member of a supergroup or channel once
// (updateSupergroup), or of a basic group (updateBasicGroup), however
// many chat lists the session loads, and again only after a loss; a
// chat given back to its other members, or opened again, is no member's
// status for an account still removed from it. A group upgraded to a
// supergroup tells the upgrade, not a status.
func TestMemberStatusReportedOnceAndOnlyToAMember(t *testing.T) {
	t.Parallel()
	w := NewWorld(Config{Seed: 1, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	w.AddAccount("b", false)
	channel := w.AddChat(tg.KindChannel, "channel", "a", "b")
	other := w.AddChat(tg.KindChannel, "other", "a", "b")
	group := w.AddChat(tg.KindBasicGroup, "group", "a", "b")
	upgraded := w.AddChat(tg.KindBasicGroup, "upgraded", "a", "b")
	w.UpgradeBasicGroup(upgraded)
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
	if held := heldReports(c); held[channel] != 1 || held[other] != 1 || held[group] != 1 || held[upgraded] != 0 {
		t.Errorf("member reports at load %v; want each channel and the basic group once, the upgraded group never", held)
	}
	w.RemoveMember("a", group, true)
	w.RemoveMember("a", group, false)
	if held := heldReports(c); held[group] != 1 {
		t.Errorf("member reports once the account is back in the basic group %v; want one", held)
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
