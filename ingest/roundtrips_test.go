package ingest_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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

// tracedPipeline returns a pipeline of account "a" on a store of its own
// whose round trips trips records, with the store and the account's client.
func tracedPipeline(t *testing.T, e *env) (*ingest.Pipeline, *store.Store, *tgsim.Client, *tripLog) {
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
	return p, st, c, trips
}

// A new archive costs two round trips to the catalogue, whatever its
// listing and even when its name may be a volume's: the unique-id lock
// with the looks up of its source key, unique ids and set, and the one
// group commit that writes the package (the
// catalogue's unique content hash stands in for a lock on it), queues its
// delivery, records its message and releases the lock.
func TestNewArchiveRoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, _, c, trips := tracedPipeline(t, e)

	files := []archivetest.File{{Name: "docs/a.txt", Data: []byte("first")}, {Name: "docs/b.txt", Data: []byte("second")}}
	for _, post := range []tgsim.Post{
		{FileName: "t.tar", Data: archivetest.Tar(files)},
		{FileName: "t.7z", Data: archivetest.SevenZip(files)}, // its CRCs give it a content signature
		{FileName: "t.zip", Data: archivetest.Zip(files[:1])}, // a volume by its name, maybe: its bytes decide
	} {
		msg := e.view(c, e.world.Post(e.src["a"], 0, post))
		trips.take()
		mustHandle(t, p, msg, store.OutcomePackage)
		sent := trips.take()
		want := 2
		if post.FileName != "t.tar" {
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
	if err != nil || len(queued) != 3 {
		t.Errorf("%d deliveries queued (%v), want the three packages'", len(queued), err)
	}
}

// Locked ahead, new archives cost one round trip for all their locks and
// looks, then their group commits: Handle claims the lock taken for its
// message. A message whose lock another holder has is locked when handled
// (it waits for the holder), and the locks no Handle claimed are let go.
func TestPrelockedArchivesRoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, _, c, trips := tracedPipeline(t, e)
	var msgs []tg.Message
	for i := range 4 {
		files := []archivetest.File{{Name: "a.txt", Data: fmt.Appendf(nil, "locked ahead %d", i)}}
		msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("p%d.tar", i), Data: archivetest.Tar(files)})))
	}
	// Another holder has the last message's lock for a moment.
	other, err := e.st.Lock(e.ctx, "u:"+msgs[3].Document.File.UniqueID)
	if err != nil {
		t.Fatal(err)
	}
	trips.take()
	release := p.Prelock(e.ctx, msgs)
	if sent := trips.take(); len(sent) != 1 {
		t.Fatalf("locking 4 messages ahead took %d round trips, want 1:\n%s", len(sent), strings.Join(sent, "\n"))
	}
	for _, m := range msgs[:2] {
		mustHandle(t, p, m, store.OutcomePackage)
	}
	for _, s := range trips.take() {
		if strings.Contains(s, "package_locks (name") {
			t.Errorf("a message locked ahead took its lock again: %s", s)
		}
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		other.Unlock()
	}()
	mustHandle(t, p, msgs[3], store.OutcomePackage)
	release() // msgs[2] was locked ahead and never handled
	var locks int
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT count(*) FROM package_locks`).Scan(&locks); err != nil || locks != 0 {
		t.Errorf("%d package locks left after the release (%v), want none", locks, err)
	}
	mustHandle(t, p, msgs[2], store.OutcomePackage)
}

// A queued delivery of a lone archive costs three round trips to the
// database once due: the delivery lock with the looks of the package,
// whether it is delivered there and whether the destination waits for a
// reconciliation; the group commit of its intent; then, after the send,
// one group commit that records the send, clears its queue row and lets
// the lock go. In a backlog that commit also takes the next delivery's
// lock with its looks and writes its intent, so each delivery after the
// first costs one.
func TestDeliveryRoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, st, c, trips := tracedPipeline(t, e)
	const n = 3
	handleTars(t, e, p, c, "delivered", n)
	due, err := st.DueWaiting(e.ctx, "a", time.Now().Add(time.Hour), 10)
	if err != nil || len(due) != n {
		t.Fatalf("%d deliveries due (%v), want the %d packages'", len(due), err, n)
	}
	trips.take()
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, st, nil).RunOnce(e.ctx)
	if err != nil || res.Delivered != n {
		t.Fatalf("deliver: %+v, %v; want %d delivered", res, err, n)
	}
	var delivery, reads []string
	for _, s := range trips.take() {
		if strings.HasPrefix(s, "SELECT") && strings.Contains(s, "FROM waiting_deliveries") {
			reads = append(reads, s) // the stage's own reads of its queue
		} else {
			delivery = append(delivery, s)
		}
	}
	if want := 3 + (n - 1); len(delivery) != want {
		t.Errorf("%d deliveries made %d round trips to the database, want %d:\n%s", n, len(delivery), want, strings.Join(delivery, "\n"))
	}
	// The due deliveries; no count of the queue by route, which only
	// delivery windows need.
	if len(reads) != 1 {
		t.Errorf("the stage read its queue %d times, want once:\n%s", len(reads), strings.Join(reads, "\n"))
	}
	if got := len(e.delivered()); got != n {
		t.Errorf("destination holds %d copies, want %d", got, n)
	}
	var left int
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT (SELECT count(*) FROM package_locks) + (SELECT count(*) FROM waiting_deliveries)`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d lock and queue rows left after the deliveries (%v), want none", left, err)
	}
}

// A delivery whose parts a restart forgot reads them from the source
// again (getMessage) and checks each still carries one of the package's
// files against the unique ids its lock's looks read: no round trip of
// its own for that, so the deliveries cost what they cost before the
// restart.
func TestDeliveryAfterRestartRoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	first, _, c, _ := tracedPipeline(t, e)
	const n = 3
	handleTars(t, e, first, c, "after restart", n)
	p, st, _, trips := tracedPipeline(t, e) // a new process: no parts kept
	trips.take()
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, st, nil).RunOnce(e.ctx)
	if err != nil || res.Delivered != n {
		t.Fatalf("deliver: %+v, %v; want %d delivered", res, err, n)
	}
	var delivery []string
	for _, s := range trips.take() {
		if !strings.HasPrefix(s, "SELECT") || !strings.Contains(s, "FROM waiting_deliveries") {
			delivery = append(delivery, s)
		}
	}
	if want := 3 + (n - 1); len(delivery) != want {
		t.Errorf("%d deliveries of parts read again made %d round trips to the database, want %d:\n%s", n, len(delivery), want, strings.Join(delivery, "\n"))
	}
	if got := len(e.delivered()); got != n {
		t.Errorf("destination holds %d copies, want %d", got, n)
	}
}

// handleTars posts n tars of account "a"'s source, each new, and catalogues
// them through p, seen by c; what names their contents.
func handleTars(t *testing.T, e *env, p *ingest.Pipeline, c *tgsim.Client, what string, n int) {
	t.Helper()
	for i := range n {
		files := []archivetest.File{{Name: "a.txt", Data: fmt.Appendf(nil, "%s %d", what, i)}}
		msg := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("%s-%d.tar", what, i), Data: archivetest.Tar(files)}))
		mustHandle(t, p, msg, store.OutcomePackage)
	}
}
