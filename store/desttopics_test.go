package store_test

import (
	"testing"

	"stashd/tg"
)

// A destination topic's row goes from nothing to begun (thread 0) to
// recorded; the first thread recorded wins.
func TestDestinationTopicFirstRecordWins(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	const dest = tg.ChatID(-1002001)
	if th, found, err := st.DestinationTopic(ctx, dest, "Dragons"); err != nil || found || th != 0 {
		t.Fatalf("before: %d, %v, %v", th, found, err)
	}
	if err := st.BeginDestinationTopic(ctx, dest, "Dragons", "a"); err != nil {
		t.Fatal(err)
	}
	if th, found, err := st.DestinationTopic(ctx, dest, "Dragons"); err != nil || !found || th != 0 {
		t.Fatalf("begun: %d, %v, %v; want found with thread 0", th, found, err)
	}
	if got, err := st.SetDestinationTopic(ctx, dest, "Dragons", 5<<20, "a"); err != nil || got != 5<<20 {
		t.Fatalf("record: %d, %v", got, err)
	}
	if got, err := st.SetDestinationTopic(ctx, dest, "Dragons", 7<<20, "b"); err != nil || got != 5<<20 {
		t.Fatalf("second record: %d, %v; want the first (%d)", got, err, 5<<20)
	}
	if err := st.BeginDestinationTopic(ctx, dest, "Dragons", "b"); err != nil {
		t.Fatal(err)
	}
	if th, _, err := st.DestinationTopic(ctx, dest, "Dragons"); err != nil || th != 5<<20 {
		t.Fatalf("after a late begin: %d, %v", th, err)
	}
	if got, err := st.SetDestinationTopic(ctx, dest, "Cats", 9<<20, "b"); err != nil || got != 9<<20 {
		t.Fatalf("record without begin: %d, %v", got, err)
	}
}
