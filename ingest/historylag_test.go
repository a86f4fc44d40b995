package ingest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/sim/tgsim"
	"stashd/store"
)

// TDLib answers getChatHistory from the end of a chat (from_message_id
// 0) from the session's own history, starting at the last message its
// database knows, and asks the server nothing when that last message is
// known (MessagesManager::get_history_impl: "if the last message is
// known, there are no reasons to get message history from server from
// the end"). A destination no session of this instance opens learns no
// message another instance sent there, so a copy that instance sent
// before it crashed is newer than anything this instance's history
// shows: reconciliation that pages from the newest message misses it
// and the part is sent twice. Opening the chat makes TDLib fetch its
// difference, asynchronously: reconciliation waits for it (tg.Views).
func TestReconcileFindsAnotherInstancesCopyLagging(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1, DifferenceDelay: 200 * time.Millisecond}, "a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "other.tar", Data: archivetest.Tar([]archivetest.File{{Name: "o", Data: []byte("o")}})})
	earlier := e.world.Post(e.dest, 0, tgsim.Post{Text: "an earlier message"})

	// The second instance ran before and looked at the destination: its
	// database holds the destination's last message as it was then.
	_, before := e.pipelineIn("a", "instance-2")
	if ch, err := before.GetChat(e.ctx, e.dest); err != nil || ch.LastMessageID != earlier.ID {
		t.Fatalf("getChat = %+v, %v; want the last message %d", ch, err, earlier.ID)
	}
	_ = before.Close()

	// The first instance sends and dies before recording the send.
	crashOn(t, e, e.world.Client("a"), posted)

	// The second instance starts again on its directory and takes the
	// delivery over.
	p2, c2 := e.pipelineIn("a", "instance-2")
	wantOneCopyTakenOver(t, e, p2, c2, posted)
}

// A set's parts recorded by one instance are loaded by id (getMessage) by
// another whose session did not follow the source while they were posted:
// TDLib answers 404 for a channel message newer than the last one the
// session learned through updates, and fetches the chat's difference
// meanwhile. The part is asked again once that can have come, not taken
// for deleted (which would dead-letter the set for good).
func TestSetPartsNewerThanTheSessionsViewLoadLagging(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1, DifferenceDelay: 200 * time.Millisecond}, "a")
	e.world.Post(e.src["a"], 0, tgsim.Post{Text: "before the set"})
	// The second instance looked at the source before the set was posted.
	_, before := e.pipelineIn("a", "instance-2")
	if _, err := before.GetChat(e.ctx, e.src["a"]); err != nil {
		t.Fatal(err)
	}
	_ = before.Close()

	p1, c1 := e.pipelineIn("a", "instance-1")
	whole := archivetest.SevenZip([]archivetest.File{{Name: "lag/part.bin", Data: []byte(strings.Repeat("l", 5000))}})
	for i, part := range archivetest.Split(whole, 3) {
		m := e.view(c1, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("lag.7z.%03d", i+1), Data: part}))
		mustHandle(t, p1, m, store.OutcomePartPending)
	}
	_ = c1.Close()

	p2, _ := e.pipelineIn("a", "instance-2")
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p2.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the set completed", res, err)
	}
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d parts, want 3", n)
	}
}
