package ingest_test

import (
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
	e := newEnvWorld(t, tgsim.Config{Seed: 1, DifferenceDelay: 300 * time.Millisecond}, "a", "b")
	pa, ca := e.pipeline("a")
	pb, cb := e.pipeline("b")
	src := e.src["a"]
	e.world.Join("b", src)
	if err := cb.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	posted := e.world.Post(src, 0, tgsim.Post{FileName: "v1.tar", Data: tarOf("a", "v1")})
	e.view(cb, posted) // b's database holds v1
	edit := e.world.EditMessageMedia(src, posted.ID, tgsim.Post{FileName: "v2.tar", Data: tarOf("a", "v2")})
	mustHandle(t, pa, e.view(ca, posted), store.OutcomePackage)
	pkg, ok, err := e.st.PackageByUniqueIDs(e.ctx, []string{edit.NewUniqueID})
	if err != nil || !ok {
		t.Fatalf("package of v2: %v, %v", ok, err)
	}
	if err := e.st.WaitDelivery(e.ctx, store.Waiting{PackageID: pkg, Destination: e.dest, Account: "b",
		Route: ingest.HandOverRoute, OpensAt: e.now, Parts: []tg.MessageKey{posted.Key()}, PartCount: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, pb, e.st, nil).RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, m := range e.world.Messages(e.dest) {
		if m.Document != nil {
			sent = append(sent, m.Document.File.UniqueID)
		}
	}
	if len(sent) != 1 || sent[0] != edit.NewUniqueID {
		t.Fatalf("destination holds %v; want v2 (%s), sent by b", sent, edit.NewUniqueID)
	}
}
