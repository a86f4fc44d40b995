package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/tg"
)

// A destination's reconciliation holds the deliveries of every account
// that sends there, and whichever account runs it frees them all: a's
// delivery, held while the reconciliation waits, goes as soon as b has
// reconciled the destination, not at a's delivery stage's next look (an
// hour here). a cannot read the destination's history, so only b can run
// the reconciliation.
func TestReconciliationByOneAccountFreesAnothersDeliveries(t *testing.T) {
	t.Parallel()
	st := openStore(t, 16)
	pr := newPair(t, 26, "a", "b")
	world, src, dest := pr.world, pr.src, pr.dest
	ctx := context.Background()
	if err := st.RequestReconcile(ctx, []tg.ChatID{dest}, "a test asked for it"); err != nil {
		t.Fatal(err)
	}
	unavailable := &tg.Error{Code: 500, Message: "INTERNAL"}
	world.InjectError("a", tg.MethodGetChatHistory, unavailable, 1_000_000)
	// b's first tries fail too, so that a's delivery is queued, and held,
	// before the reconciliation is done.
	world.InjectError("b", tg.MethodGetChatHistory, unavailable, 1_000_000)
	cfg := floodConfig(pr.accounts(), dest)
	cfg.Delivery.Interval = time.Hour
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()

	posted := postTars(world, src, "r", 1)
	waitCatalogued(t, st, posted[0].Key())
	if n, err := st.QueuedDeliveries(ctx, ""); err != nil || n != 1 {
		t.Fatalf("queued deliveries = %d (%v); want the package's, held by the reconciliation", n, err)
	}
	if n := countDocuments(world, dest); n != 0 {
		t.Fatalf("destination holds %d documents before its reconciliation, want none", n)
	}
	world.InjectError("b", tg.MethodGetChatHistory, nil, 0)
	waitDocuments(t, world, dest, 1)
	checkOnce(t, world, dest, posted)
	if pending, err := st.ReconcilePending(ctx, dest); err != nil || pending {
		t.Errorf("reconciliation still pending (%v) after the delivery went", err)
	}
}

// So does a reconciliation another instance runs: instance x's account a,
// which cannot read the destination's history, holds its delivery while
// the reconciliation waits; instance y's account b runs it, and x's
// delivery goes once x's next look at the reconciliations (every 10 s)
// sees it done, not at its delivery stage's next look (an hour here).
func TestReconciliationByAnotherInstanceFreesTheDeliveries(t *testing.T) {
	t.Parallel()
	st := openStore(t, 16)
	pr := newPair(t, 28, "a", "b")
	world, src, dest := pr.world, pr.src, pr.dest
	ctx := context.Background()
	if err := st.RequestReconcile(ctx, []tg.ChatID{dest}, "a test asked for it"); err != nil {
		t.Fatal(err)
	}
	unavailable := &tg.Error{Code: 500, Message: "INTERNAL"}
	world.InjectError("a", tg.MethodGetChatHistory, unavailable, 1_000_000)
	world.InjectError("b", tg.MethodGetChatHistory, unavailable, 1_000_000)
	run := func(instance string, a daemon.Account) *daemon.Daemon {
		cfg := floodConfig([]daemon.Account{a}, dest)
		cfg.Instance = instance
		cfg.Delivery.Interval = time.Hour
		d := daemon.New(cfg, st, pr.dial)
		prepareAndRun(t, d)
		return d
	}
	x := run("x", pr.accounts()[0])
	defer x.Kill()
	y := run("y", pr.accounts()[1])
	defer y.Kill()

	posted := postTars(world, src, "s", 1)
	waitCatalogued(t, st, posted[0].Key())
	if n, err := st.QueuedDeliveries(ctx, ""); err != nil || n != 1 {
		t.Fatalf("queued deliveries = %d (%v); want the package's, held by the reconciliation", n, err)
	}
	world.InjectError("b", tg.MethodGetChatHistory, nil, 0)
	waitDocuments(t, world, dest, 1)
	checkOnce(t, world, dest, posted)
}
