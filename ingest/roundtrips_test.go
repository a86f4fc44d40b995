package ingest_test

import (
	"strings"
	"sync"
	"testing"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/internal/pgtrips"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// tripLog records what a store's connections send (pgtrips: each
// statement, batch and COPY is a round trip).
type tripLog struct {
	mu   sync.Mutex
	sent []string
}

func (l *tripLog) add(what string) {
	if strings.Contains(what, "pg_control_system") {
		return // a new connection's own set-up (the store's server watch)
	}
	l.mu.Lock()
	l.sent = append(l.sent, strings.Join(strings.Fields(what), " "))
	l.mu.Unlock()
}

func (l *tripLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.sent
	l.sent = nil
	return out
}

// A new archive costs two round trips to the catalogue, whatever its
// listing: the unique-id lock with the looks up of its source key and
// unique ids, and the one group commit that writes the package (the
// catalogue's unique content hash stands in for a lock on it), queues its
// delivery, records its message and releases the lock.
func TestNewArchiveRoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	trips := &tripLog{}
	st, err := store.Open(e.ctx, store.Config{URL: e.st.Pool().Config().ConnString(), Tracer: pgtrips.Tracer{Sent: trips.add}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c := e.world.Client("a")
	if err := c.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{e.dest}}, st, tg.NewSession(c, func(tg.Update) {}), nil)

	files := []archivetest.File{{Name: "docs/a.txt", Data: []byte("first")}, {Name: "docs/b.txt", Data: []byte("second")}}
	for _, post := range []tgsim.Post{
		{FileName: "t.tar", Data: archivetest.Tar(files)},
		{FileName: "t.7z", Data: archivetest.SevenZip(files)}, // its CRCs give it a content signature
	} {
		msg := e.view(c, e.world.Post(e.src["a"], 0, post))
		trips.take()
		mustHandle(t, p, msg, store.OutcomePackage)
		sent := trips.take()
		want := 2
		if post.FileName == "t.7z" {
			want = 3 // and the signature lock with its look for the package it repacks
		}
		if len(sent) > want {
			t.Errorf("%s: %d round trips, want %d:\n%s", post.FileName, len(sent), want, strings.Join(sent, "\n"))
		}
	}
	var locks int
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT count(*) FROM package_locks`).Scan(&locks); err != nil {
		t.Fatal(err)
	}
	if locks != 0 {
		t.Errorf("%d package locks held after the packages were catalogued, want none", locks)
	}
	queued, err := e.st.DueWaiting(e.ctx, "a", e.now, 10)
	if err != nil || len(queued) != 2 {
		t.Errorf("%d deliveries queued (%v), want the two packages'", len(queued), err)
	}
}
