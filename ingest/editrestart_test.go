package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/listener"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// blockingProc is a Processor whose Process waits until its context ends:
// a worker busy with long downloads.
type blockingProc struct{ ingest.Processor }

func (blockingProc) Process(ctx context.Context, _ tg.Message) (store.Outcome, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// An edit that turns a text message into a document reaches the listener
// as a content change once, after the watermark has passed the message.
// A stop that leaves its re-fetch in the queue (a crash, or a drain cut
// short by its deadline) must not forget it: the next start fetches the
// message again and mirrors the document, without a catch-up (which pages
// above the watermark only) or a rescan (whose window may not reach the
// message's date).
func TestEditQueuedAtAStopIsFetchedAfterTheRestart(t *testing.T) {
	for _, c := range []struct {
		name  string
		crash bool
	}{
		{"crash", true},
		{"drain cut short", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "a")
			src := e.src["a"]
			p1, c1 := e.pipeline("a")
			text := e.view(c1, e.world.Post(src, 0, tgsim.Post{Text: "soon a tar"}))
			mustHandle(t, p1, text, store.OutcomeNotArchive)
			var busy []tg.Message
			for i := range 7 {
				name := fmt.Sprintf("busy%d.zip", i)
				busy = append(busy, e.world.Post(src, 0, tgsim.Post{FileName: name, Data: zipOf("b.txt", name)}))
			}
			// The watermark is past the text message: it was handled live.
			if err := e.st.AdvanceWatermark(e.ctx, src, text.ID.ServerID()); err != nil {
				t.Fatal(err)
			}

			// The first life: the listener follows the source through its
			// own session; its only worker is busy with another message,
			// and six more wait in the queue before the edit's re-fetch (a
			// worker cancelled by a stop may take a few more items, and
			// each ends at once).
			lst1 := startListener(t, e, src)
			lc := e.world.Client("a")
			if err := lc.LoadChats(e.ctx); err != nil {
				t.Fatal(err)
			}
			if err := lc.OpenChat(e.ctx, src); err != nil {
				t.Fatal(err)
			}
			sess := tg.NewSession(lc, lst1.HandleUpdate)
			pool1 := ingest.NewPool(ingest.PoolConfig{Account: "a", Workers: 1}, lst1,
				blockingProc{Processor: p1}, nil)
			pctx, cancel := context.WithCancel(e.ctx)
			defer cancel()
			if err := pool1.Start(pctx); err != nil {
				t.Fatal(err)
			}
			for _, m := range busy {
				lst1.HandleUpdate(tg.NewMessage{Message: e.view(c1, m)})
			}
			waitFor(t, "the worker busy", func() bool { return len(lst1.Queue()) == len(busy)-1 })
			e.world.EditIntoDocument(src, text.ID, tgsim.Post{FileName: "edited.tar",
				Data: archivetest.Tar([]archivetest.File{{Name: "edited.txt", Data: []byte("edited")}})})
			waitFor(t, "the content change queued", func() bool { return len(lst1.Queue()) == len(busy) })
			// The worker stays busy a while: several flush intervals.
			time.Sleep(200 * time.Millisecond)

			if c.crash {
				// Nothing of the first life runs on: its worker stays
				// blocked until the test ends, its queue unread.
				lst1.Kill()
				defer pool1.Stop()
			} else {
				lst1.CloseQueue()
				dctx, dcancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
				if pool1.Wait(dctx) {
					t.Fatal("the drain finished although its only worker was busy")
				}
				dcancel()
				lst1.Stop()
			}
			_ = lc.Close()
			<-sess.Done()

			// The next start, past any dead letter's delay: a new session,
			// listener, pool and retry loop, no catch-up. A worker the stop
			// found with the re-fetch in its hands made it a dead letter;
			// otherwise the re-fetch is still to be queued.
			e.now = e.now.Add(time.Hour)
			p2, _ := e.pipeline("a")
			lst2 := startListener(t, e, src)
			pool2 := ingest.NewPool(ingest.PoolConfig{Account: "a", Workers: 1}, lst2, p2, nil)
			if err := pool2.Start(e.ctx); err != nil {
				t.Fatal(err)
			}
			defer pool2.Stop()
			retry := ingest.NewRetrier(ingest.RetryConfig{}, p2, e.st, nil)
			waitFor(t, "the edited message catalogued after the restart", func() bool {
				if _, err := retry.RunOnce(e.ctx); err != nil {
					t.Fatal(err)
				}
				out, ok, err := e.st.MessageHandled(e.ctx, text.Key())
				return err == nil && ok && out == store.OutcomePackage
			})
		})
	}
}

// startListener starts a listener of account "a" watching src from its
// stored state, killed when the test ends.
func startListener(t *testing.T, e *env, src tg.ChatID) *listener.Listener {
	t.Helper()
	stored, err := e.st.GetSource(e.ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	l := listener.New(listener.Config{Account: "a", QueueCapacity: 8, FlushInterval: 20 * time.Millisecond}, e.st, nil)
	l.Watch(stored)
	if err := l.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Kill)
	return l
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
