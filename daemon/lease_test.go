package daemon_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/internal/pgtest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// pausable is the lease store of one instance: while paused, its lease
// calls fail as they do for a process that is stopped or cut off from the
// database. It records the lease expiry its last successful acquisition
// or renewal set.
type pausable struct {
	daemon.LeaseStore
	paused    atomic.Bool
	mu        sync.Mutex
	lastUntil time.Time
}

var errPaused = errors.New("database out of reach")

func (p *pausable) RenewLease(ctx context.Context, account, owner string, epoch int64, ttl time.Duration) (time.Time, error) {
	if p.paused.Load() {
		return time.Time{}, errPaused
	}
	until, err := p.LeaseStore.RenewLease(ctx, account, owner, epoch, ttl)
	if err == nil {
		p.mu.Lock()
		p.lastUntil = until
		p.mu.Unlock()
	}
	return until, err
}

func (p *pausable) AcquireLeaseWith(ctx context.Context, account, owner string, ttl time.Duration, dead string, cfg store.AccountConfig) (store.Acquired, bool, error) {
	if p.paused.Load() {
		return store.Acquired{}, false, errPaused
	}
	a, ok, err := p.LeaseStore.AcquireLeaseWith(ctx, account, owner, ttl, dead, cfg)
	if ok {
		p.mu.Lock()
		p.lastUntil = a.Until
		p.mu.Unlock()
	}
	return a, ok, err
}

func (p *pausable) Lease(ctx context.Context, account string) (store.Lease, error) {
	if p.paused.Load() {
		return store.Lease{}, errPaused
	}
	return p.LeaseStore.Lease(ctx, account)
}

func (p *pausable) until() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastUntil
}

// events passes on the lease events of every instance, by instance.
type events struct {
	ch chan instanceEvent
}

type instanceEvent struct {
	instance string
	daemon.LeaseEvent
}

func newEvents() *events { return &events{ch: make(chan instanceEvent, 64)} }

func (e *events) hook(instance string) func(daemon.LeaseEvent) {
	return func(ev daemon.LeaseEvent) {
		e.ch <- instanceEvent{instance, ev}
	}
}

// wait returns the next event of instance of kind, skipping others.
func (e *events) wait(t *testing.T, instance, kind string) daemon.LeaseEvent {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev := <-e.ch:
			if ev.instance == instance && ev.Kind == kind {
				return ev.LeaseEvent
			}
		case <-timeout:
			t.Fatalf("instance %s: no %q lease event", instance, kind)
		}
	}
}

type instance struct {
	d     *daemon.Daemon
	reg   *prometheus.Registry
	lease *pausable
}

func startInstance(t *testing.T, name string, st *store.Store, world *tgsim.World, src, dest tg.ChatID, ttl time.Duration, ev *events) instance {
	t.Helper()
	return runInstance(t, name, st, world, daemon.Config{Destinations: []tg.ChatID{dest}, LeaseTTL: ttl}, src, ev, os.Stderr)
}

// runInstance starts instance name of account acc, watching src, on st
// with cfg (its accounts, instance, lease hook, registry and logger
// filled in), its lease store pausable and its log written to logs.
func runInstance(t *testing.T, name string, st *store.Store, world *tgsim.World, cfg daemon.Config, src tg.ChatID, ev *events, logs io.Writer) instance {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Accounts = []daemon.Account{{Name: "acc", Sources: []tg.ChatID{src}}}
	cfg.Workers, cfg.Instance, cfg.OnLease, cfg.Registry = 2, name, ev.hook(name), reg
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("instance", name)
	cfg.Ingest = ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second}
	d := daemon.New(cfg, st, func(context.Context, string) (tg.Client, error) { return world.Client("acc"), nil })
	p := &pausable{LeaseStore: st}
	daemon.SetLeaseStore(d, p)
	if err := d.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.Run(); err != nil {
		t.Fatal(err)
	}
	return instance{d: d, reg: reg, lease: p}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				if m.GetGauge() != nil {
					return m.GetGauge().GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("metric %s not exported", name)
	return 0
}

// Two instances on one database and one world: a owns the account, b
// stands by (healthy and ready). a is paused (its renewals fail): it stops
// the account's Telegram client before its lease lapses as the database
// stores it; b takes the account over at the next epoch, counts a
// failover, releases a's source claims and mirrors what is posted next;
// a's late fenced write is refused by the database.
func TestPausedOwnerStopsBeforeItsLeaseLapsesAndStandbyTakesOver(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, 32)
	world := tgsim.NewWorld(tgsim.Config{Seed: 3, FilesDir: t.TempDir()})
	world.AddAccount("acc", false)
	src := world.AddChat(tg.KindChannel, "news", "acc")
	dest := world.AddChat(tg.KindChannel, "mirror", "acc")
	ev := newEvents()
	const ttl = 6 * time.Second

	a := startInstance(t, "a", st, world, src, dest, ttl, ev)
	defer a.d.Shutdown(context.Background())
	acquired := ev.wait(t, "a", "acquired")
	b := startInstance(t, "b", st, world, src, dest, ttl, ev)
	defer b.d.Shutdown(context.Background())
	if err := b.d.Ready(ctx); err != nil {
		t.Errorf("standby instance not ready: %v", err)
	}
	if got := gauge(t, a.reg, "stashd_account_lease_owned"); got != 1 {
		t.Errorf("owner's lease_owned = %v, want 1", got)
	}
	if got := gauge(t, b.reg, "stashd_account_lease_owned"); got != 0 {
		t.Errorf("standby's lease_owned = %v, want 0", got)
	}
	post := func(name string) tg.Message {
		return world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	}
	waitHandled(t, st, post("before.tar").Key())
	// A claim a paused owner would hold on: the new owner must not wait
	// for it to expire.
	if _, err := st.Pool().Exec(ctx, `UPDATE sources SET claim_owner = 'a', claim_until = now() + interval '10 minutes' WHERE chat_id = $1`, int64(src)); err != nil {
		t.Fatal(err)
	}

	a.lease.paused.Store(true)
	stopped := ev.wait(t, "a", "stopped")
	if until := a.lease.until(); !stopped.At.Before(until) {
		t.Errorf("a stopped its client at %v, after its lease lapsed at %v", stopped.At, until)
	}
	if stopped.Epoch != acquired.Epoch {
		t.Errorf("a stopped epoch %d, want %d", stopped.Epoch, acquired.Epoch)
	}
	if got := gauge(t, a.reg, "stashd_account_lease_owned"); got != 0 {
		t.Errorf("a's lease_owned after the stop = %v, want 0", got)
	}
	took := ev.wait(t, "b", "acquired")
	if took.Epoch != acquired.Epoch+1 {
		t.Errorf("b took epoch %d, want %d", took.Epoch, acquired.Epoch+1)
	}
	if got := gauge(t, b.reg, "stashd_account_failovers_total"); got != 1 {
		t.Errorf("b's failovers = %v, want 1", got)
	}
	if got := gauge(t, b.reg, "stashd_account_lease_owned"); got != 1 {
		t.Errorf("b's lease_owned = %v, want 1", got)
	}
	// a's late write, with its epoch, is refused.
	late := store.WithFence(ctx, "acc", acquired.Epoch, nil)
	if err := st.AdvanceWatermark(late, src, 1<<40); !errors.Is(err, store.ErrStaleEpoch) {
		t.Errorf("a's late watermark advance = %v, want ErrStaleEpoch", err)
	}
	// b runs the account now: what is posted next is mirrored.
	waitHandled(t, st, post("after.tar").Key())
	var claimedByA bool
	if err := st.Pool().QueryRow(ctx, `SELECT claim_owner IS NOT DISTINCT FROM 'a' FROM sources WHERE chat_id = $1`, int64(src)).Scan(&claimedByA); err != nil {
		t.Fatal(err)
	}
	if claimedByA {
		t.Errorf("a's claim on the source survived b's takeover")
	}

	// The world saw both instances' sessions of the account: a made no
	// request once b had made one.
	if n, examples := world.SessionOverlaps(); n != 0 {
		t.Errorf("%d requests of a's session after b's began: %v", n, examples)
	}

	// Shutdown releases the lease after the account stopped.
	b.d.Shutdown(ctx)
	rel := ev.wait(t, "b", "released")
	if rel.Epoch != took.Epoch {
		t.Errorf("b released epoch %d, want %d", rel.Epoch, took.Epoch)
	}
	l, err := st.Lease(ctx, "acc")
	if err != nil || l.Owner != "" || l.Epoch != took.Epoch {
		t.Errorf("lease after b's shutdown = %+v, %v; want released at epoch %d", l, err, took.Epoch)
	}
}

// A process resumed after a pause makes no Telegram request for an account
// whose lease it lost, even before the account is stopped: the lease gates
// every request. The gate closes when the local deadline passes (the
// monotonic clock runs during a pause), renewed or not.
func TestLeaseGateBlocksRequestsAfterTheDeadline(t *testing.T) {
	t.Parallel()
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		now := time.Now()
		if err := daemon.GateAt(1, now, time.Hour)(); err != nil {
			t.Errorf("gate before the deadline = %v", err)
		}
		// A renewal sent ten seconds ago that kept the lease for five: the
		// process was paused past its deadline.
		if err := daemon.GateAt(1, now.Add(-10*time.Second), 5*time.Second)(); !errors.Is(err, tg.ErrLeaseLost) {
			t.Errorf("gate after the deadline = %v, want ErrLeaseLost", err)
		}
	})
	t.Run("daemon", func(t *testing.T) {
		ctx := t.Context()
		st, err := store.Open(ctx, store.Config{URL: pgtest.New(t), MaxConns: 16})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		world := tgsim.NewWorld(tgsim.Config{Seed: 4, FilesDir: t.TempDir()})
		world.AddAccount("acc", false)
		src := world.AddChat(tg.KindChannel, "news", "acc")
		dest := world.AddChat(tg.KindChannel, "mirror", "acc")
		ev := newEvents()
		reg := prometheus.NewRegistry()
		d := daemon.New(daemon.Config{
			Accounts: []daemon.Account{{Name: "acc", Sources: []tg.ChatID{src}}}, Destinations: []tg.ChatID{dest},
			Workers: 1, Instance: "a", LeaseTTL: 3 * time.Second, OnLease: ev.hook("a"), Registry: reg,
		}, st, func(context.Context, string) (tg.Client, error) { return world.Client("acc"), nil })
		p := &pausable{LeaseStore: st}
		daemon.SetLeaseStore(d, p)
		var paced *tg.Paced
		gated := make(chan error, 1)
		var before, after map[string]int
		daemon.SetBeforeLostStop(d, func(string) {
			// The lease is lost; the account still runs. A request now:
			before = world.Calls("acc")
			_, err := paced.SearchChatMessages(context.Background(), tg.Search{Chat: src, Limit: 1})
			after = world.Calls("acc")
			gated <- err
		})
		if err := d.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		defer d.Shutdown(context.Background())
		if err := d.Run(); err != nil {
			t.Fatal(err)
		}
		if paced = daemon.AccountPaced(d, "acc"); paced == nil {
			t.Fatal("account not running")
		}
		if _, err := paced.SearchChatMessages(ctx, tg.Search{Chat: src, Limit: 1}); err != nil {
			t.Fatalf("request under the lease: %v", err)
		}
		p.paused.Store(true)
		select {
		case err := <-gated:
			if !errors.Is(err, tg.ErrLeaseLost) {
				t.Errorf("request after the lease was lost = %v, want ErrLeaseLost", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the lease was never lost")
		}
		if before[tg.MethodSearchChatMessages] != after[tg.MethodSearchChatMessages] {
			t.Errorf("searchChatMessages reached Telegram after the lease was lost")
		}
		ev.wait(t, "a", "stopped")
		if got := gauge(t, reg, "stashd_account_lease_owned"); got != 0 {
			t.Errorf("lease_owned after the loss = %v, want 0", got)
		}
	})
}

// An account that fails to start after a takeover is not left half-run:
// its lease is released (a standby may take it) and the start is retried
// with backoff, at the next epoch.
func TestFailedTakeoverReleasesTheLeaseAndRetries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, 32)
	world := tgsim.NewWorld(tgsim.Config{Seed: 6, FilesDir: t.TempDir()})
	world.AddAccount("acc", false)
	src := world.AddChat(tg.KindChannel, "news", "acc")
	dest := world.AddChat(tg.KindChannel, "mirror", "acc")
	ev := newEvents()
	a := startInstance(t, "a", st, world, src, dest, 3*time.Second, ev)
	first := ev.wait(t, "a", "acquired")

	var dials atomic.Int32
	b := daemon.New(daemon.Config{
		Accounts: []daemon.Account{{Name: "acc", Sources: []tg.ChatID{src}}}, Destinations: []tg.ChatID{dest},
		Workers: 1, Instance: "b", LeaseTTL: 3 * time.Second, OnLease: ev.hook("b"),
	}, st, func(context.Context, string) (tg.Client, error) {
		if dials.Add(1) == 1 {
			return nil, errors.New("telegram unreachable")
		}
		return world.Client("acc"), nil
	})
	prepareAndRun(t, b)
	defer b.Shutdown(context.Background())

	a.d.Shutdown(ctx) // releases the lease
	for i, want := range []struct {
		kind  string
		epoch int64
	}{{"acquired", first.Epoch + 1}, {"released", first.Epoch + 1}, {"acquired", first.Epoch + 2}, {"started", first.Epoch + 2}} {
		if got := ev.wait(t, "b", want.kind); got.Epoch != want.epoch {
			t.Errorf("b's lease step %d: %s at epoch %d, want %d", i, want.kind, got.Epoch, want.epoch)
		}
		if i == 1 {
			// Until the retry, readiness says why the account is not run.
			if err := b.Ready(ctx); err == nil || !strings.Contains(err.Error(), "telegram unreachable") {
				t.Errorf("b ready after a failed start: %v, want the start's error", err)
			}
		}
	}
	if got := dials.Load(); got != 2 {
		t.Errorf("b dialled %d times, want 2 (one failure, one retry)", got)
	}
	if p := daemon.AccountPaced(b, "acc"); p == nil {
		t.Error("b does not run the account after the retry")
	}
}
