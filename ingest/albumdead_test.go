package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"stashd/ingest"
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

// A document of an album recorded as one of its parts by another handling
// (a worker, catch-up) after the sweep read the album's parts, before it
// looked at the ids between them: the look finds it recorded, and it is
// one of the album's, not something else. The album waits for the next
// sweep and is catalogued whole, one package of all three.
func TestAlbumDocumentRecordedWhileTheSweepLooksJoinsIt(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 4}, "a")
	c := e.world.ClientIn("a", "instance-1")
	t.Cleanup(func() { _ = c.Close() })
	if err := c.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	var posted []tg.Message
	for i := range 3 {
		name := fmt.Sprintf("scans (%d).zip", i+1)
		posted = append(posted, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: zipOf(name+".txt", name), AlbumID: 32}))
	}
	e.world.Post(e.src["a"], 0, tgsim.Post{Text: "after the album"})
	st := &recordsAfterRead{Store: e.st}
	p := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{e.dest},
		SetSettle: time.Minute, SetMaxWait: time.Hour, RetryBase: time.Millisecond, Now: func() time.Time { return e.now }},
		st, tg.NewSession(c, func(tg.Update) {}), nil)
	for _, m := range []tg.Message{posted[0], posted[2]} {
		mustHandle(t, p, e.view(c, m), store.OutcomePartPending)
	}
	middle := e.view(c, posted[1])
	st.after = func() { mustHandle(t, p, middle, store.OutcomePartPending) }
	e.now = e.now.Add(2 * time.Minute)
	completed, parts := sweepThrice(t, e, p)
	if completed != 1 || len(parts) != 1 || parts[0] != 3 {
		t.Fatalf("the album was catalogued as %d package(s) of %v parts (%d completed); want one package of all 3",
			len(parts), parts, completed)
	}
}

// recordsAfterRead runs after once, right after the first read of a set's
// parts returns: another handling recording a part meanwhile.
type recordsAfterRead struct {
	*store.Store
	after func()
}

func (s *recordsAfterRead) SetParts(ctx context.Context, chat tg.ChatID, topic int64, setKey string) ([]store.SourceMessage, error) {
	parts, err := s.Store.SetParts(ctx, chat, topic, setKey)
	if s.after != nil {
		after := s.after
		s.after = nil
		after()
	}
	return parts, err
}
