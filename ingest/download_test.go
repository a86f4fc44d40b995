package ingest_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// safety bounds a test that would otherwise hang on a download that never
// ends; a passing test never reaches it.
const safety = 30 * time.Second

func tarOf(name, body string) []byte {
	return archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(body)}})
}

// filesOnDisk lists the regular files under dir.
func filesOnDisk(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deadLetterReason processes m to its end and returns the reason of the
// dead letter it must become.
func deadLetterReason(t *testing.T, e *env, p *ingest.Pipeline, m tg.Message) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, safety)
	defer cancel()
	out, err := p.Process(ctx, m)
	if err != nil || out != store.OutcomeDeadLetter {
		t.Fatalf("process = %q, %v; want a dead letter", out, err)
	}
	dls, err := e.st.DeadLetters(e.ctx, store.DeadPending, 10)
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters = %+v, %v; want one, retryable", dls, err)
	}
	return dls[0].Reason
}

// A download that TDLib stops (neither active nor complete) fails the
// attempt instead of hanging the worker; after the retries the message is a
// retryable dead letter saying why.
func TestStoppedDownloadBecomesDeadLetter(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1, FailDownloadRate: 1}, "a")
	p, c, m := e.pipelineWith("a", nil, nil)
	msg := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "stops.tar", Data: tarOf("a", "stops")}))
	if reason := deadLetterReason(t, e, p, msg); !strings.Contains(reason, tg.ErrDownloadStopped.Error()) {
		t.Errorf("dead letter reason = %q", reason)
	}
	if n := testutil.ToFloat64(m.DownloadFailures("a", ingest.DownloadStopped)); n != 4*3 {
		t.Errorf("stopped downloads counted = %v, want 3 tries in each of 4 attempts", n)
	}
	if left := filesOnDisk(t, e.files); len(left) != 0 {
		t.Errorf("files left on disk: %v", left)
	}
}

// A download that stops making progress is cancelled in TDLib after the
// stall limit, and the message ends as a retryable dead letter; once
// downloads work again the retry delivers it.
func TestStalledDownloadIsCancelledThenRetried(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1, StallDownloadRate: 1}, "a")
	p, c, m := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.DownloadStall = 50 * time.Millisecond }, nil)
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "stalls.tar", Data: tarOf("a", "stalls")})
	msg := e.view(c, posted)
	if reason := deadLetterReason(t, e, p, msg); !strings.Contains(reason, tg.ErrDownloadStalled.Error()) {
		t.Errorf("dead letter reason = %q", reason)
	}
	if n := e.world.Calls("a")[tg.MethodCancelDownloadFile]; n < 1 {
		t.Errorf("cancelDownloadFile calls = %d; a stalled download must be cancelled", n)
	}
	if n := testutil.ToFloat64(m.DownloadFailures("a", ingest.DownloadStalled)); n != 4*3 {
		t.Errorf("stalled downloads counted = %v, want 3 tries in each of 4 attempts", n)
	}

	// The same message on a world whose downloads work: delivered.
	e2 := newEnvWorld(t, tgsim.Config{Seed: 1}, "a")
	p2, c2, _ := e2.pipelineWith("a", func(cfg *ingest.Config) { cfg.DownloadStall = 50 * time.Millisecond }, nil)
	msg2 := e2.view(c2, e2.world.Post(e2.src["a"], 0, tgsim.Post{FileName: "stalls.tar", Data: tarOf("a", "stalls")}))
	mustHandle(t, p2, msg2, store.OutcomePackage)
}

// TDLib downloads nothing while the account's connection is away. An
// outage far longer than the stall limit is no stall: the download waits
// for the connection's return and completes, with no try given up.
func TestDownloadWaitsOutAnOutage(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1}, "a")
	p, c, m := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.DownloadStall = 50 * time.Millisecond }, nil)
	msg := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "outage.tar", Data: tarOf("a", "outage")}))
	e.world.Disconnect("a", time.Second)
	mustHandle(t, p, msg, store.OutcomePackage)
	if n := testutil.ToFloat64(m.DownloadFailures("a", ingest.DownloadStalled)); n != 0 {
		t.Errorf("stalled downloads counted = %v through an outage, want none", n)
	}
}

// Downloaded archives are deleted once hashed and listed: the delivery
// sends by remote id and needs no local copy.
func TestDownloadedFilesAreDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c, m := e.pipelineWith("a", nil, nil)
	for i, name := range []string{"one.tar", "two.tar"} {
		msg := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: tarOf(name, strings.Repeat("x", 100*i+10))}))
		mustHandle(t, p, msg, store.OutcomePackage)
	}
	if left := filesOnDisk(t, e.files); len(left) != 0 {
		t.Errorf("files left on disk after ingest: %v", left)
	}
	if n := e.world.Calls("a")[tg.MethodDeleteFile]; n != 2 {
		t.Errorf("deleteFile calls = %d, want 2", n)
	}
	if len(e.delivered()) != 2 {
		t.Errorf("delivered %d, want 2", len(e.delivered()))
	}
	if v := testutil.ToFloat64(m.OnDiskBytes("a")); v != 0 {
		t.Errorf("bytes in flight after ingest = %v, want 0", v)
	}
}

// diskSpy tracks the bytes downloaded and not yet deleted. The first
// download waits until a second one starts (or a safety delay passes), so
// that two packages overlap whenever the budget lets them.
type diskSpy struct {
	*tg.Session
	mu      sync.Mutex
	held    map[int32]int64
	cur     int64
	peak    int64
	starts  int
	overlap chan struct{}
}

func (s *diskSpy) Download(ctx context.Context, f tg.File, stall time.Duration) (tg.File, error) {
	s.mu.Lock()
	s.held[f.ID] = f.Size
	s.cur += f.Size
	s.peak = max(s.peak, s.cur)
	s.starts++
	n := s.starts
	s.mu.Unlock()
	switch n {
	case 1:
		select {
		case <-s.overlap:
		case <-time.After(time.Second): // safety net: the budget holds the second back
		case <-ctx.Done():
		}
	case 2:
		close(s.overlap)
	}
	return s.Session.Download(ctx, f, stall)
}

func (s *diskSpy) DeleteFile(ctx context.Context, id int32) error {
	s.mu.Lock()
	s.cur -= s.held[id]
	delete(s.held, id)
	s.mu.Unlock()
	return s.Session.DeleteFile(ctx, id)
}

// Two packages that together exceed the download budget are never on disk
// at the same time; both are delivered.
func TestDownloadBudgetBoundsBytesOnDisk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	a := tarOf("a", strings.Repeat("a", 4000))
	b := tarOf("b", strings.Repeat("b", 3000))
	budget := int64(max(len(a), len(b)))
	spy := &diskSpy{held: map[int32]int64{}, overlap: make(chan struct{})}
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.DownloadBudget = budget },
		func(s *tg.Session) ingest.Telegram { spy.Session = s; return spy })
	var msgs []tg.Message
	for _, data := range [][]byte{a, b} {
		msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "p.tar", Data: data})))
	}
	var wg sync.WaitGroup
	for _, m := range msgs {
		wg.Go(func() { mustHandle(t, p, m, store.OutcomePackage) })
	}
	wg.Wait()
	if spy.peak > budget {
		t.Errorf("peak bytes on disk = %d, above the budget %d", spy.peak, budget)
	}
	if len(e.delivered()) != 2 {
		t.Errorf("delivered %d, want 2", len(e.delivered()))
	}
}

// A package larger than the whole budget still goes through, alone.
func TestPackageLargerThanBudgetProceeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.DownloadBudget = 16 }, nil)
	msg := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "big.tar", Data: tarOf("big", strings.Repeat("z", 5000))}))
	ctx, cancel := context.WithTimeout(e.ctx, safety)
	defer cancel()
	if out, err := p.Handle(ctx, msg); err != nil || out != store.OutcomePackage {
		t.Fatalf("handle = %q, %v; want the package", out, err)
	}
}

// slotSpy counts the packages whose files are downloaded and not yet
// deleted. Each download waits a little for more to start, so that as
// many overlap as the pipeline lets.
type slotSpy struct {
	*tg.Session
	mu         sync.Mutex
	held, peak int
}

func (s *slotSpy) Download(ctx context.Context, f tg.File, stall time.Duration) (tg.File, error) {
	s.mu.Lock()
	s.held++
	s.peak = max(s.peak, s.held)
	s.mu.Unlock()
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
	}
	return s.Session.Download(ctx, f, stall)
}

func (s *slotSpy) DeleteFile(ctx context.Context, id int32) error {
	s.mu.Lock()
	s.held--
	s.mu.Unlock()
	return s.Session.DeleteFile(ctx, id)
}

// Downloads bounds the packages of a backlog downloaded at once, whatever
// the number of its messages handled at once; the live path is bounded by
// its own workers, not by the slots. Every package goes through.
func TestDownloadSlotsBoundABacklogsDownloads(t *testing.T) {
	t.Parallel()
	for _, backlog := range []bool{true, false} {
		t.Run(fmt.Sprintf("backlog=%v", backlog), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "a")
			spy := &slotSpy{}
			p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Downloads = 2 },
				func(s *tg.Session) ingest.Telegram { spy.Session = s; return spy })
			var msgs []tg.Message
			for i := range 6 {
				data := tarOf(fmt.Sprintf("f%d", i), strings.Repeat("x", 100+i))
				msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("p%d.tar", i), Data: data})))
			}
			var wg sync.WaitGroup
			for _, m := range msgs {
				wg.Go(func() {
					if !backlog {
						mustHandle(t, p, m, store.OutcomePackage)
						return
					}
					ctx, cancel := context.WithTimeout(e.ctx, safety)
					defer cancel()
					if out, err := p.Backlog().Process(ctx, m); err != nil || out != store.OutcomePackage {
						t.Errorf("process %v = %q, %v; want the package", m.Key(), out, err)
					}
				})
			}
			wg.Wait()
			if backlog && spy.peak != 2 {
				t.Errorf("at most %d packages of a backlog downloaded at once, want 2 (the slots)", spy.peak)
			}
			if !backlog && spy.peak <= 2 {
				t.Errorf("at most %d live packages downloaded at once, want more than the backlog's 2 slots", spy.peak)
			}
			if len(e.delivered()) != 6 {
				t.Errorf("delivered %d, want 6", len(e.delivered()))
			}
		})
	}
}
