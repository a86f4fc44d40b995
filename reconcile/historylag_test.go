package reconcile_test

import (
	"testing"
	"time"

	"stashd/sim/tgsim"
)

// getChatHistory from the end starts at the last message the session's
// database knows (MessagesManager::get_history_impl asks the server for
// the end of a history only when it knows no last message). An instance
// restarted on its TDLib directory does not know of copies another
// instance sent to a destination while it was stopped; after a rewind,
// its reconciliation pages the destination from that stale end, misses
// those copies and leaves their deliveries to be sent again. Opening the
// chat makes TDLib fetch its difference, asynchronously: the
// reconciliation waits for it (tg.Views).
func TestDestinationFindsCopiesSentWhileStoppedLagging(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, w, src, dest, _ := newReconcileWorld(t, tgsim.Config{Seed: 3, DifferenceDelay: 200 * time.Millisecond})
	earlier := w.Post(dest, 0, tgsim.Post{Text: "an earlier message"})

	// The instance ran on its directory and looked at the destination.
	before := w.ClientIn("a", "instance-1")
	if err := before.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	if ch, err := before.GetChat(ctx, dest); err != nil || ch.LastMessageID != earlier.ID {
		t.Fatalf("getChat = %+v, %v; want the last message %d", ch, err, earlier.ID)
	}
	_ = before.Close()

	// While it is stopped another instance delivers two parts.
	var parts []part
	for i := range 2 {
		p := newPart(t, st, w, src, dest, i+1)
		p.sent(t, st, p.copyIn(w, dest))
		parts = append(parts, p)
	}
	// The catalogue is rewound to before those deliveries.
	for _, p := range parts {
		if _, err := st.Pool().Exec(ctx, `DELETE FROM deliveries WHERE package_id = $1`, p.pkg.ID); err != nil {
			t.Fatal(err)
		}
	}

	// The instance starts again on its directory and reconciles.
	c := w.ClientIn("a", "instance-1")
	t.Cleanup(func() { _ = c.Close() })
	if err := c.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	res := reconcileNow(t, st, c, dest, 0)
	if res.Recovered != 2 {
		t.Errorf("rebuilt %d records, want 2 (the copies sent while the instance was stopped)", res.Recovered)
	}
	for i, p := range parts {
		if _, ok, err := st.FoundCopy(ctx, p.pkg.ID, 0, dest); err != nil || !ok {
			t.Errorf("part %d's copy not found: %v, %v", i, ok, err)
		}
	}
}
