package ingest_test

import (
	"context"
	"testing"
	"time"

	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// openChat starts the chat's difference and answers before it is in
// (MessagesManager::open_dialog): a delivery handed to an account whose
// session holds a part as it was before an edit must read the part again
// only once the difference is in, or the part is given up as replaced and
// the package never reaches the destination.
func TestHandedDeliveryRereadsAPartOnceTheDifferenceIsIn(t *testing.T) {
	t.Parallel()
	deliverHandedStalePart(t, newEnvWorld(t, tgsim.Config{Seed: 1, DifferenceDelay: 300 * time.Millisecond}, "a", "b"), nil)
}

// A delivery handed to an account whose session followed the source long
// since, right after that session came back from an outage during which
// the part was posted: its view counts as current by time, but the chat's
// difference for the outage is not in, and TDLib answers 404 for the
// part. That is no deletion (the part is newer than anything the session
// knows of the chat): the delivery waits, and goes once the view caught
// up, rather than be given up.
func TestHandedDeliveryOfAPartNotSeenYetWaits(t *testing.T) {
	t.Parallel()
	const delay = 500 * time.Millisecond
	e := newEnvWorld(t, tgsim.Config{Seed: 1, DifferenceDelay: delay}, "a", "b")
	src := e.src["a"]
	e.world.Join("b", src)
	pa, ca := e.pipeline("a")
	var cb *tgsim.Client
	pb, cb, _ := e.pipelineWith("b", func(cfg *ingest.Config) {
		cfg.Views = tg.NewViews(func(ctx context.Context, chat tg.ChatID) error { return cb.OpenChat(ctx, chat) }, 10*time.Millisecond)
	}, nil)
	if _, err := cb.GetChat(e.ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := pb.Config().Views.Current(e.ctx, src); err != nil {
		t.Fatal(err)
	}
	time.Sleep(delay + 100*time.Millisecond) // the open's own difference

	e.world.Disconnect("b", 0)
	posted := e.world.Post(src, 0, tgsim.Post{FileName: "late.tar", Data: tarOf("a", "late")})
	mustHandle(t, pa, e.view(ca, posted), store.OutcomePackage)
	pkg, ok, err := e.st.PackageByUniqueIDs(e.ctx, []string{posted.Document.File.UniqueID})
	if err != nil || !ok {
		t.Fatalf("package: %v, %v", ok, err)
	}
	if err := e.st.WaitDelivery(e.ctx, store.Waiting{PackageID: pkg, Destination: e.dest, Account: "b",
		Route: ingest.HandOverRoute, OpensAt: e.now, Parts: []tg.MessageKey{posted.Key()}, PartCount: 1}); err != nil {
		t.Fatal(err)
	}
	e.world.Reconnect("b")
	d := ingest.NewDeliverer(ingest.DeliveryConfig{}, pb, e.st, nil)
	if _, err := d.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.delivered()); n != 0 {
		t.Fatalf("destination holds %d documents before b's view caught up, want none", n)
	}
	time.Sleep(delay + 100*time.Millisecond)
	e.now = e.now.Add(time.Hour)
	if _, err := d.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.copiesOf(posted.Document.File.UniqueID); len(got) != 1 {
		t.Fatalf("destination holds %d copies of the part once b's view caught up, want 1", len(got))
	}
}
