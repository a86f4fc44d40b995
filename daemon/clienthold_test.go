package daemon_test

import (
	"testing"
	"time"

	"stashd/daemon"
	"stashd/store"
	"stashd/tg"
)

// The account's TDLib client is held at its start by a wait of every
// request, by a wait of its sends while an intent of it is open, and by a
// chat's wait while an intent of it to that chat is open; a wait no
// pending send would break holds nothing, whatever its length.
func TestClientHoldByScopeAndOpenIntents(t *testing.T) {
	t.Parallel()
	st := openStore(t, 4)
	ctx := t.Context()
	origin := tg.MessageKey{Chat: -1, Message: 1 << 20}
	hash := make([]byte, 32)
	pkg, _, err := st.CreatePackage(ctx, store.Package{ContentHash: hash, Name: "p.zip", Format: "zip", TotalSize: 1, PartCount: 1, Origin: origin},
		[]store.Part{{Index: 0, FileName: "p.zip", Size: 1, SHA256: hash, UniqueID: "p", Source: origin}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const open, other = tg.ChatID(-300), tg.ChatID(-400)
	if _, err := st.EnsureIntents(ctx, pkg, open, []int{0}, "a"); err != nil {
		t.Fatal(err)
	}
	all := store.FloodWait{Scope: store.FloodWaitAll, Left: 10 * time.Second}
	sends := store.FloodWait{Scope: store.FloodWaitSends, Left: time.Hour}
	chat := func(c tg.ChatID, d time.Duration) store.FloodWait {
		return store.FloodWait{Scope: store.FloodWaitChat, Chat: c, Left: d}
	}
	for _, c := range []struct {
		name    string
		account string
		waits   []store.FloodWait
		want    time.Duration
	}{
		{"no wait", "a", nil, 0},
		{"every request, no intent", "b", []store.FloodWait{all}, all.Left},
		{"sends, an intent open", "a", []store.FloodWait{sends}, sends.Left},
		{"sends, no intent", "b", []store.FloodWait{sends}, 0},
		{"the chat of an open intent", "a", []store.FloodWait{chat(open, 30*time.Minute)}, 30 * time.Minute},
		{"another chat", "a", []store.FloodWait{chat(other, time.Hour), all}, all.Left},
		{"the longest that holds", "a", []store.FloodWait{all, chat(open, time.Minute), chat(other, 2*time.Hour)}, time.Minute},
	} {
		got, err := daemon.ClientHold(ctx, st, c.account, c.waits)
		if err != nil || got != c.want {
			t.Errorf("%s: the start of %s is held %v (%v); want %v", c.name, c.account, got, err, c.want)
		}
	}
}
