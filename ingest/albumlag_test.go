package ingest_test

import (
	"fmt"
	"testing"
	"time"

	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// An album's documents recorded by one instance, up to the sixth of nine
// (it died before handling the rest), are completed by another whose
// session did not follow the source while they were posted. Before the
// album is taken as whole, the id after its last recorded document is
// asked for: TDLib answers 404 for a channel message newer than the last
// one its session learned through updates, and fetches the chat's
// difference meanwhile. That 404 is no proof that the album ends there;
// the id is asked again once the difference can have come, and the album
// is catalogued whole, as one package of nine.
func TestAlbumEndNewerThanTheSessionsViewIsNotTakenForItsEnd(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1, DifferenceDelay: 200 * time.Millisecond}, "a")
	e.world.Post(e.src["a"], 0, tgsim.Post{Text: "before the album"})
	// The second instance looked at the source before the album was posted.
	_, before := e.pipelineIn("a", "instance-2")
	if _, err := before.GetChat(e.ctx, e.src["a"]); err != nil {
		t.Fatal(err)
	}
	_ = before.Close()

	p1, c1 := e.pipelineIn("a", "instance-1")
	var posted []tg.Message
	for i := range 9 {
		name := fmt.Sprintf("scans (%d).zip", i+1)
		posted = append(posted, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: zipOf(name+".txt", name), AlbumID: 25}))
	}
	for _, m := range posted[:6] {
		mustHandle(t, p1, e.view(c1, m), store.OutcomePartPending)
	}
	_ = c1.Close()

	p2, _ := e.pipelineIn("a", "instance-2")
	e.now = e.now.Add(2 * time.Minute)
	completed, parts := sweepThrice(t, e, p2)
	if completed != 1 || len(parts) != 1 || parts[0] != 9 {
		t.Fatalf("the album was catalogued as %d package(s) of %v parts (%d completed); want one package of all 9",
			len(parts), parts, completed)
	}
}

// sweepThrice sweeps p's sets three times, two minutes apart from e's
// clock (each settled and past any wait), and returns how many sets were
// completed and the part counts of the packages catalogued.
func sweepThrice(t *testing.T, e *env, p *ingest.Pipeline) (completed int, parts []int) {
	t.Helper()
	for range 3 {
		res, err := p.Sweep(e.ctx)
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		completed += res.Completed
		e.now = e.now.Add(2 * time.Minute)
	}
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		parts = append(parts, pkg.PartCount)
	}
	return completed, parts
}
