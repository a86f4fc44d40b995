package ingest_test

import (
	"context"
	"testing"
	"time"

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
	hold := func(_ context.Context, dest tg.ChatID, pending bool, _ int64) (bool, error) {
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

// A send left pending when its process stopped lands only when TDLib
// re-sends it, at the next start on its directory: after the catalogue
// rewound to before its intent (a restore, an asynchronous failover), and
// possibly after the destination's reconciliation read past the point it
// lands at (TDLib re-sends once connected, a flood wait later). The
// session reports it with a token no delivery row carries: the copy must
// still be remembered by its file, or the package, catalogued again from
// its source, is sent a second time.
func TestResentCopyWhoseDeliveryTheRewindLostIsNotSentAgain(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 44, ResendAfterRestart: true}, "a")
	logs := &lockedBuffer{}
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "late.tar", Data: archivetest.Tar([]archivetest.File{{Name: "l", Data: []byte("late")}})})
	e.world.HoldSends(true)
	crashOn(t, e, e.world.ClientIn("a", "a"), posted)
	e.world.HoldSends(false)
	// The rewind: the catalogue is back at a backup taken before the
	// package was catalogued.
	if _, err := e.st.Pool().Exec(e.ctx, `TRUNCATE packages CASCADE`); err != nil {
		t.Fatal(err)
	}
	uid := posted.Document.File.UniqueID

	// The account starts again on its directory: TDLib re-sends the
	// pending message, and the session reports it.
	a := e.instance("a", logs)
	for deadline := time.Now().Add(10 * time.Second); len(e.world.Messages(e.dest)) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pending send was not re-sent")
		}
	}
	// The recorder settles it (with the copy remembered by its file once
	// it can; without, nothing shows, and the wait runs out).
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, ok, err := e.st.KeptCopy(e.ctx, e.dest, uid, ingest.TokenOf(e.world.Messages(e.dest)[0].Caption)); err != nil || ok {
			break
		}
	}
	// Catch-up hands the forgotten message to ingest again.
	mustHandle(t, a.p, e.view(a.c, posted), store.OutcomePackage)
	if n := len(e.copiesOf(uid)); n != 1 {
		t.Fatalf("the destination holds %d copies of the part, want the one re-sent", n)
	}
}
