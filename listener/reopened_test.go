package listener

import (
	"testing"
	"time"

	"stashd/store"
	"stashd/tg"
)

// A forum topic reported open (updateForumTopicInfo) resumes the
// deliveries to its chat that its closing put off, and only those: one put
// off for another reason keeps its time.
func TestReopenedTopicResumesItsDeliveries(t *testing.T) {
	t.Parallel()
	l, st, _ := setup(t, 8, 0)
	ctx := t.Context()
	const dest = tg.ChatID(-1002)
	later := time.Now().Add(time.Hour)
	for i, cause := range []string{"topic 5 of -1002: " + tg.ErrTopicClosed.Error(), "telegram 500: RPC_CALL_FAIL"} {
		hash := make([]byte, 32)
		hash[0] = byte(i + 1)
		k := tg.MessageKey{Chat: chat, Message: tg.MessageIDFromServer(int64(i + 1))}
		id, _, err := st.CreatePackage(ctx, store.Package{ContentHash: hash, Name: "p.zip", Format: "zip", TotalSize: 1, PartCount: 1, Origin: k},
			[]store.Part{{Index: 0, FileName: "p.zip", Size: 1, SHA256: hash, UniqueID: string(rune('a' + i)), Source: k}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := store.Waiting{PackageID: id, Destination: dest, Account: "a", Parts: []tg.MessageKey{k}, PartCount: 1, OpensAt: time.Now()}
		if _, err := st.QueueDelivery(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := st.DeferDelivery(ctx, id, dest, later, cause); err != nil {
			t.Fatal(err)
		}
	}
	l.HandleUpdate(tg.ForumTopicInfo{Topic: tg.Topic{ChatID: dest, ThreadID: 5 << 20, Name: "t", IsClosed: true}})
	l.flush(ctx)
	if due, err := st.DueWaiting(ctx, "a", time.Now(), 10); err != nil || len(due) != 0 {
		t.Fatalf("due after a closing = %v, %v; want none", due, err)
	}
	l.HandleUpdate(tg.ForumTopicInfo{Topic: tg.Topic{ChatID: dest, ThreadID: 5 << 20, Name: "t"}})
	l.flush(ctx)
	due, err := st.DueWaiting(ctx, "a", time.Now(), 10)
	if err != nil || len(due) != 1 || due[0].LastError != "topic 5 of -1002: "+tg.ErrTopicClosed.Error() {
		t.Fatalf("due after the reopening = %+v, %v; want the delivery the closing put off", due, err)
	}
}
