package ingest_test

import (
	"context"
	"testing"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// While its destination is held (a reconciliation pending after the
// catalogue rewound), a delivery stays queued; once the reconciliation
// finishes it is sent. The catalogue's answer comes to Hold from the
// delivery lock's round trip, once per run: the destination's other
// deliveries wait without taking their locks.
func TestHeldDestinationKeepsItsDeliveriesQueued(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 41}, "a")
	p, c := e.pipeline("a")
	for _, name := range []string{"held", "also"} {
		posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name + ".7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "h", Data: []byte(name)}})})
		mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	}
	if err := e.st.RequestReconcile(e.ctx, []tg.ChatID{e.dest}, "test"); err != nil {
		t.Fatal(err)
	}

	asked := 0
	hold := func(_ context.Context, dest tg.ChatID, pending bool) (bool, error) {
		if dest == e.dest {
			asked++
		}
		return pending, nil
	}
	d := ingest.NewDeliverer(ingest.DeliveryConfig{Hold: hold}, p, e.st, nil)
	res, err := d.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Delivered != 0 || res.Held != 2 || asked != 1 || len(e.world.Messages(e.dest)) != 0 {
		t.Fatalf("held: %+v, asked %d times, destination holds %d messages; want nothing sent, two held, asked once",
			res, asked, len(e.world.Messages(e.dest)))
	}
	if err := e.st.FinishReconcile(e.ctx, e.dest, nil); err != nil {
		t.Fatal(err)
	}
	if res, err = d.RunOnce(e.ctx); err != nil || res.Delivered != 2 {
		t.Fatalf("released: %+v, %v; want both delivered", res, err)
	}
	if len(e.world.Messages(e.dest)) != 2 {
		t.Fatalf("destination holds %d messages after the release, want 2", len(e.world.Messages(e.dest)))
	}
}

// A copy of a part that a reconciliation found in the destination with no
// delivery row (lost with a rewind) is the delivery: it is recorded, not
// sent again.
func TestCopyFoundInDestinationIsNotSentAgain(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 43}, "a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "found.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "f", Data: []byte("found")}})})
	// The copy stashd sent before the catalogue forgot it.
	copyMsg := e.world.Post(e.dest, 0, tgsim.Post{SameFileAs: posted.Document.File.UniqueID, Caption: "found.7z\n" + ingest.TokenPrefix + "lost"})
	p, c := e.pipeline("a")
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	if out, err := e.st.RecordCopy(e.ctx, store.CopyFound{Destination: e.dest, Message: copyMsg.ID, Token: "lost",
		UniqueID: posted.Document.File.UniqueID}); err != nil || out.Outcome != store.CopyKept {
		t.Fatalf("record the found copy: %v, %v", out, err)
	}
	if got := len(e.delivered()); got != 1 {
		t.Fatalf("destination holds %d documents, want the one copy", got)
	}
	if sends := e.world.Calls("a")[tg.MethodSendMessage]; sends != 0 {
		t.Errorf("%d sendMessage calls, want none", sends)
	}
}
