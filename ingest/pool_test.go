package ingest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/listener"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// chanQueue is a queue that records what the pool reports.
type chanQueue struct {
	ch       chan listener.Item
	mu       sync.Mutex
	done     []listener.Item
	released []listener.Item
	dirty    []tg.ChatID
	doneCh   chan listener.Item
}

func newChanQueue(n int) *chanQueue {
	return &chanQueue{ch: make(chan listener.Item, n), doneCh: make(chan listener.Item, n)}
}
func (q *chanQueue) Queue() <-chan listener.Item { return q.ch }
func (q *chanQueue) Done(it listener.Item) {
	q.mu.Lock()
	q.done = append(q.done, it)
	q.mu.Unlock()
	q.doneCh <- it
}
func (q *chanQueue) Release(it listener.Item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.released = append(q.released, it)
}
func (q *chanQueue) MarkDirty(c tg.ChatID, _ string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dirty = append(q.dirty, c)
}

// panicky panics on messages whose server id is in panics, and records dead
// letters.
type panicky struct {
	mu     sync.Mutex
	panics map[int64]bool
	dead   []tg.MessageKey
}

func (p *panicky) Process(_ context.Context, m tg.Message) (store.Outcome, error) {
	p.mu.Lock()
	boom := p.panics[m.ID.ServerID()]
	p.mu.Unlock()
	if boom {
		panic("corrupt state")
	}
	return store.OutcomePackage, nil
}
func (p *panicky) DeadLetter(_ context.Context, m tg.Message, _ error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead = append(p.dead, m.Key())
	return nil
}
func (p *panicky) GetMessage(context.Context, tg.ChatID, tg.MessageID) (tg.Message, error) {
	return tg.Message{}, errors.New("not used")
}

func item(s int64) listener.Item {
	return listener.Item{Message: tg.Message{ChatID: -1, ID: tg.MessageIDFromServer(s)}}
}

func TestPanickingWorkerIsRestartedAndItsItemDeadLettered(t *testing.T) {
	t.Parallel()
	q := newChanQueue(8)
	proc := &panicky{panics: map[int64]bool{1: true}}
	pool := ingest.NewPool(ingest.PoolConfig{Account: "a", Workers: 1, RestartBackoff: time.Millisecond}, q, proc,
		ingest.NewMetrics(prometheus.NewRegistry()))
	if err := pool.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer pool.Stop()
	q.ch <- item(1)
	q.ch <- item(2)
	// The only worker panics on 1; 2 is handled only if it was restarted.
	got := map[int64]bool{}
	for range 2 {
		select {
		case it := <-q.doneCh:
			got[it.Message.ID.ServerID()] = true
		case <-time.After(10 * time.Second):
			t.Fatal("worker was not restarted")
		}
	}
	if !got[1] || !got[2] {
		t.Fatalf("done = %v, want both items reported", got)
	}
	proc.mu.Lock()
	defer proc.mu.Unlock()
	if len(proc.dead) != 1 || proc.dead[0].Message.ServerID() != 1 {
		t.Errorf("dead letters = %v, want the panicking message", proc.dead)
	}
	if pool.Alive() != 1 {
		t.Errorf("alive = %d, want 1", pool.Alive())
	}
}

func TestAllWorkersDeadIsFatal(t *testing.T) {
	t.Parallel()
	q := newChanQueue(64)
	proc := &panicky{panics: map[int64]bool{}}
	for s := int64(1); s <= 20; s++ {
		proc.panics[s] = true
		q.ch <- item(s)
	}
	pool := ingest.NewPool(ingest.PoolConfig{Account: "a", Workers: 2, MaxCrashes: 2, RestartBackoff: time.Millisecond}, q, proc, nil)
	if err := pool.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer pool.Stop()
	select {
	case err := <-pool.Fatal():
		if !errors.Is(err, ingest.ErrAllWorkersDead) {
			t.Fatalf("fatal = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no fatal error with every worker crashing")
	}
	if pool.Alive() != 0 {
		t.Errorf("alive = %d, want 0", pool.Alive())
	}
}

// The workers count as alive as soon as Start returns: the daemon tells
// systemd it is ready right after, and a health check then must not find
// none because their goroutines have not run yet.
func TestWorkersAliveOnceStartReturns(t *testing.T) {
	t.Parallel()
	q := newChanQueue(1)
	pool := ingest.NewPool(ingest.PoolConfig{Account: "a", Workers: 3}, q, &panicky{}, nil)
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := pool.Alive(); n != 3 {
		t.Errorf("%d workers alive as Start returns, want 3", n)
	}
	close(q.ch)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !pool.Wait(ctx) {
		t.Fatal("drain did not finish")
	}
	if n := pool.Alive(); n != 0 {
		t.Errorf("%d workers alive after the drain, want 0", n)
	}
}

func TestDrainHandlesQueuedItemsThenStops(t *testing.T) {
	t.Parallel()
	q := newChanQueue(16)
	for s := int64(1); s <= 10; s++ {
		q.ch <- item(s)
	}
	close(q.ch)
	pool := ingest.NewPool(ingest.PoolConfig{Account: "a", Workers: 3}, q, &panicky{}, nil)
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !pool.Wait(ctx) {
		t.Fatal("drain did not finish")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.done) != 10 {
		t.Errorf("%d items handled in the drain, want 10", len(q.done))
	}
}

// An edit that turned a text message into a document comes as a content
// change, fetched again by id (a Refetch item): catch-up pages above the
// watermark only, so nothing else would bring it back. When that fetch
// fails with an error that may pass (a 500, a flood wait), the message
// becomes a dead letter, which the retry loop fetches again and mirrors.
// A message deleted meanwhile leaves no letter: nothing is left to mirror.
func TestFailedRefetchOfAnEditIsRetriedFromADeadLetter(t *testing.T) {
	for _, c := range []struct {
		name    string
		fail    error
		deleted bool
	}{
		{"500", &tg.Error{Code: 500, Message: "INTERNAL"}, false},
		{"flood wait", &tg.FloodWaitError{RetryAfter: time.Second, Err: &tg.Error{Code: 429, Message: "Too Many Requests: retry after 1"}}, false},
		{"deleted", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "a")
			p, cl := e.pipeline("a")
			m := e.view(cl, e.world.Post(e.src["a"], 0, tgsim.Post{Text: "soon a tar"}))
			mustHandle(t, p, m, store.OutcomeNotArchive)
			e.world.EditIntoDocument(m.ChatID, m.ID, tgsim.Post{FileName: "edited.tar",
				Data: archivetest.Tar([]archivetest.File{{Name: "edited.txt", Data: []byte("edited")}})})
			if c.deleted {
				e.world.Delete(m.ChatID, m.ID)
			} else {
				e.world.InjectError("a", tg.MethodGetMessage, c.fail, 1)
			}

			q := newChanQueue(1)
			pool := ingest.NewPool(ingest.PoolConfig{Account: "a", Workers: 1}, q, p, nil)
			if err := pool.Start(e.ctx); err != nil {
				t.Fatal(err)
			}
			q.ch <- listener.Item{Message: tg.Message{ChatID: m.ChatID, ID: m.ID}, Refetch: true, Queued: time.Now()}
			close(q.ch)
			pool.Wait(e.ctx)

			letters, err := e.st.DeadLetters(e.ctx, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if c.deleted {
				if len(letters) != 0 {
					t.Errorf("dead letters %+v for a changed message deleted before its fetch; want none", letters)
				}
				return
			}
			if len(letters) != 1 || letters[0].Key != m.Key() || letters[0].State != store.DeadPending {
				t.Fatalf("dead letters %+v after the changed message's fetch failed; want one pending for %s", letters, m.Key())
			}
			e.now = e.now.Add(time.Hour)
			res, err := ingest.NewRetrier(ingest.RetryConfig{}, p, e.st, nil).RunOnce(e.ctx)
			if err != nil || res.Resolved != 1 {
				t.Fatalf("retry = %+v, %v; want the letter fetched again and resolved", res, err)
			}
			if out, ok, err := e.st.MessageHandled(e.ctx, m.Key()); err != nil || !ok || out != store.OutcomePackage {
				t.Errorf("edited message handled as %q (%v, %v); want a package", out, ok, err)
			}
			if n := len(e.delivered()); n != 1 {
				t.Errorf("%d copies delivered, want 1", n)
			}
		})
	}
}
