package listener

import (
	"testing"

	"stashd/tg"
)

// A reload of a source's state after the catalogue rewound (Watch again,
// daemon's reloadSources) takes the catalogue's watermarks, but what
// TDLib told this session of the account's access is no catalogue state:
// a loss reported before the reload stays in doubt until a server call
// reads the chat, so a scan that only read TDLib's local state does not
// make the source synced, and its dirty reason still names the loss.
func TestReloadKeepsALostAccessInDoubt(t *testing.T) {
	t.Parallel()
	l, st, _ := setup(t, 8, 10)
	l.HandleUpdate(tg.ChatAccessLost{Chat: chat})
	if !l.AccessInDoubt(chat) {
		t.Fatal("the lost access is not in doubt")
	}
	src, err := st.GetSource(t.Context(), chat)
	if err != nil {
		t.Fatal(err)
	}
	l.Watch(src) // the reload
	if !l.AccessInDoubt(chat) {
		t.Error("the reload forgot the account's lost access: the next scan would not check it")
	}
	if l.CaughtUp(chat, src.Era, 10) || !l.IsDirty(chat) {
		t.Error("a scan with no server read made a source whose access was lost before the reload synced")
	}
	l.mu.Lock()
	reason := l.sources[chat].reason
	l.mu.Unlock()
	if reason != ReasonAccessLost {
		t.Errorf("after the reload the source is dirty for %q, want %q", reason, ReasonAccessLost)
	}
}
