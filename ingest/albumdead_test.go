package ingest_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// An album whose first document became a dead letter for a failure that
// may pass (a database that went away while it was handled), its others
// recorded as parts, in a source synced past the album: the album is not
// taken as whole without its first document. The document is handled
// again and joins its album, catalogued as one package of all three; a
// package of the last two, then one of the first alone, would hold
// neither the album posted nor its content hash.
func TestAlbumWithADeadLetteredDocumentWaitsForIt(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 3}, "a")
	p, c := e.pipelineIn("a", "instance-1")
	e.world.Post(e.src["a"], 0, tgsim.Post{Text: "before the album"})
	var posted []tg.Message
	for i := range 3 {
		name := fmt.Sprintf("scans (%d).zip", i+1)
		posted = append(posted, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: zipOf(name+".txt", name), AlbumID: 31}))
	}
	e.world.Post(e.src["a"], 0, tgsim.Post{Text: "after the album"})
	if err := p.DeadLetter(e.ctx, e.view(c, posted[0]), errors.New("the database went away")); err != nil {
		t.Fatal(err)
	}
	for _, m := range posted[1:] {
		mustHandle(t, p, e.view(c, m), store.OutcomePartPending)
	}
	e.now = e.now.Add(2 * time.Minute)
	completed, parts := sweepThrice(t, e, p)
	if completed != 1 || len(parts) != 1 || parts[0] != 3 {
		t.Fatalf("the album was catalogued as %d package(s) of %v parts (%d completed); want one package of all 3",
			len(parts), parts, completed)
	}
}
