package ingest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// holdingSession holds the download of one file (by unique id) until
// release is closed, and closes started when it begins.
type holdingSession struct {
	*tg.Session
	uid     string
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func (s *holdingSession) Download(ctx context.Context, f tg.File, stall time.Duration) (tg.File, error) {
	if f.UniqueID == s.uid {
		s.once.Do(func() { close(s.started) })
		select {
		case <-s.release:
		case <-ctx.Done():
			return tg.File{}, ctx.Err()
		}
	}
	return s.Session.Download(ctx, f, stall)
}

// sweepEnv is a pipeline whose sets are settled as soon as they are
// handled (its clock runs an hour ahead), expire after maxWait, and the
// download of the first part of set "slow" is held.
type sweepEnv struct {
	*env
	p    *ingest.Pipeline
	c    *tgsim.Client
	hold *holdingSession
}

func newSweepEnv(t *testing.T, maxWait time.Duration) *sweepEnv {
	e := &sweepEnv{env: newEnv(t, "a"), hold: &holdingSession{started: make(chan struct{}), release: make(chan struct{})}}
	e.p, e.c, _ = e.pipelineWith("a", func(cfg *ingest.Config) {
		cfg.SetMaxWait = maxWait
		cfg.Now = func() time.Time { return time.Now().Add(time.Hour) }
	}, func(s *tg.Session) ingest.Telegram {
		e.hold.Session = s
		return e.hold
	})
	return e
}

// postSet posts and handles the three RAR volumes of set stem; the
// download of the first is held when stem is "slow".
func (e *sweepEnv) postSet(t *testing.T, stem string) {
	t.Helper()
	vols := archivetest.RarVolumes([]archivetest.File{{Name: stem + "/data.bin", Data: []byte(strings.Repeat(stem, 3000))}}, 3)
	for i, v := range vols {
		m := e.view(e.c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("%s.part%d.rar", stem, i+1), Data: v}))
		if stem == "slow" && i == 0 {
			e.hold.uid = m.Document.File.UniqueID
		}
		mustHandle(t, e.p, m, store.OutcomePartPending)
	}
}

// sweepSlowSet posts set "slow", starts a set sweeper of parallel slots
// and returns it once the set's held download has begun.
func (e *sweepEnv) sweepSlowSet(t *testing.T, parallel int) *ingest.SetSweeper {
	t.Helper()
	e.postSet(t, "slow")
	sw := ingest.NewSetSweeper(e.p, 20*time.Millisecond, parallel)
	if err := sw.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.hold.started:
	case <-time.After(10 * time.Second):
		sw.Stop()
		t.Fatal("the first set was not started")
	}
	return sw
}

// eventually polls done for up to 10 s and reports whether it came true.
func eventually(done func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if done() {
			return true
		}
	}
	return false
}

// waitPackages waits up to 10 s for n packages in the catalogue, and
// reports whether they came.
func (e *sweepEnv) waitPackages(n int) bool {
	return eventually(func() bool {
		pkgs, err := e.st.PackageHashes(e.ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		return len(pkgs) >= n
	})
}

// A sweep completes its complete sets side by side: a set whose download
// takes long does not hold up the others.
func TestSweepCompletesSetsSideBySide(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t, 24*time.Hour)
	e.postSet(t, "slow")
	e.postSet(t, "quick")
	quickFirst := make(chan bool, 1)
	go func() {
		defer close(e.hold.release)
		select {
		case <-e.hold.started:
			quickFirst <- e.waitPackages(1) // "quick", while "slow" is held
		case <-time.After(10 * time.Second):
			quickFirst <- false // "slow" never began its download
		}
	}()
	res, err := e.p.Sweep(e.ctx)
	if err != nil || res.Completed != 2 {
		t.Fatalf("sweep = %+v, %v; want both sets completed", res, err)
	}
	if !<-quickFirst {
		t.Error("the second set was not catalogued while the first one's download was held")
	}
}

// The set sweeper does not wait for the sets it started: a set that
// becomes complete while another's download is held is catalogued, and
// the held set is not started twice.
func TestSetSweeperDoesNotWaitForALongSet(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t, 24*time.Hour)
	sw := e.sweepSlowSet(t, 2)
	defer sw.Stop()
	e.postSet(t, "quick")
	if !e.waitPackages(1) {
		t.Fatal("the second set was not catalogued while the first one's download was held")
	}
	close(e.hold.release)
	if !e.waitPackages(2) {
		t.Fatal("the first set was not catalogued once its download went on")
	}
	sw.Stop()
	if n := len(e.delivered()); n != 6 {
		t.Errorf("%d documents delivered, want 6 (two sets of three, each once)", n)
	}
}

// With every slot busy, the set sweeper goes on: a complete set waits for
// a later sweep, and an incomplete set that expired meanwhile becomes a
// dead letter while the long download goes on.
func TestSetSweeperWithEverySlotBusyGoesOn(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t, 30*time.Minute)
	sw := e.sweepSlowSet(t, 1)
	defer sw.Stop()
	e.postSet(t, "quick")
	lost := e.view(e.c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "lost.z01", Data: []byte("PK\x07\x08 a first volume")}))
	mustHandle(t, e.p, lost, store.OutcomePartPending)
	dead := eventually(func() bool {
		out, ok, err := e.st.MessageHandled(e.ctx, lost.Key())
		if err != nil {
			t.Fatal(err)
		}
		return ok && out == store.OutcomeDeadLetter
	})
	if !dead {
		t.Error("the expired set was not dead-lettered while every slot was busy")
	}
	close(e.hold.release)
	if !e.waitPackages(2) {
		t.Fatal("the two complete sets were not catalogued once the slot was free")
	}
}

// leaseLostSession refuses every download as the daemon's gate does once
// the account's lease is lost, and counts them.
type leaseLostSession struct {
	*tg.Session
	refused *atomic.Int32
}

func (s leaseLostSession) Download(context.Context, tg.File, time.Duration) (tg.File, error) {
	s.refused.Add(1)
	return tg.File{}, fmt.Errorf("downloadFile: %w", tg.ErrLeaseLost)
}

// A set whose completion the lease's loss stops, past SetMaxWait, is no
// dead letter: it stays pending for the instance that runs the account
// next.
func TestSetStoppedByALostLeaseStaysPending(t *testing.T) {
	t.Parallel()
	e := &sweepEnv{env: newEnv(t, "a")}
	var refused atomic.Int32
	e.p, e.c, _ = e.pipelineWith("a", func(cfg *ingest.Config) {
		cfg.SetMaxWait = time.Minute
		cfg.Now = func() time.Time { return time.Now().Add(time.Hour) }
	}, func(s *tg.Session) ingest.Telegram { return leaseLostSession{s, &refused} })
	e.hold = &holdingSession{}
	e.postSet(t, "stopped")
	res, err := e.p.Sweep(e.ctx)
	if err != nil || res.DeadLetter != 0 || refused.Load() == 0 {
		t.Fatalf("sweep = %+v, %v, %d downloads refused; want the set tried and no dead letter", res, err, refused.Load())
	}
	sets, err := e.st.PendingSets(e.ctx, "a")
	if err != nil || len(sets) != 1 {
		t.Errorf("%d pending sets (%v), want the stopped one", len(sets), err)
	}
}

// panickingSession panics in every download, as a bug hit by a set's
// bytes would.
type panickingSession struct{ *tg.Session }

func (s panickingSession) Download(context.Context, tg.File, time.Duration) (tg.File, error) {
	panic("a bug the bytes hit")
}

// A panic in a set's completion makes the set a dead letter, to be retried
// later, and the sweep goes on.
func TestSetCompletionPanicIsTheSetsDeadLetter(t *testing.T) {
	t.Parallel()
	e := &sweepEnv{env: newEnv(t, "a"), hold: &holdingSession{}}
	e.p, e.c, _ = e.pipelineWith("a", func(cfg *ingest.Config) {
		cfg.Now = func() time.Time { return time.Now().Add(time.Hour) }
	}, func(s *tg.Session) ingest.Telegram { return panickingSession{s} })
	e.postSet(t, "panics")
	res, err := e.p.Sweep(e.ctx)
	if err != nil || res.DeadLetter != 1 {
		t.Fatalf("sweep = %+v, %v; want the set dead-lettered", res, err)
	}
	if sets, err := e.st.PendingSets(e.ctx, "a"); err != nil || len(sets) != 0 {
		t.Errorf("%d pending sets (%v), want none", len(sets), err)
	}
}
