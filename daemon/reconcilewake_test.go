package daemon_test

import (
	"context"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/store"
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
	st := openStore(t, poolConns)
	pr := newPair(t, 26, "a", "b")
	free := reconciledByBAlone(t, st, pr)
	cfg := floodConfig(pr.accounts(), pr.dest)
	cfg.Delivery.Interval = time.Hour
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()

	heldUntilReconciled(t, st, pr, free)
}

// So does a reconciliation another instance runs: instance x's account a,
// which cannot read the destination's history, holds its delivery while
// the reconciliation waits; instance y's account b runs it, and x's
// delivery goes once x's next look at the reconciliations (every 10 s)
// sees it done, not at its delivery stage's next look (an hour here).
func TestReconciliationByAnotherInstanceFreesTheDeliveries(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 28, "a", "b")
	free := reconciledByBAlone(t, st, pr)
	run := func(instance string, a daemon.Account) *daemon.Daemon {
		cfg := floodConfig([]daemon.Account{a}, pr.dest)
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

	heldUntilReconciled(t, st, pr, free)
}

// reconciledByBAlone asks for the reconciliation of pr's destination and
// makes every read of a history fail: a's for good, b's until free is
// called, so that a delivery can be queued, and held, before b runs the
// reconciliation.
func reconciledByBAlone(t *testing.T, st *store.Store, pr pair) (free func()) {
	t.Helper()
	if err := st.RequestReconcile(context.Background(), []tg.ChatID{pr.dest}, "a test asked for it"); err != nil {
		t.Fatal(err)
	}
	unavailable := &tg.Error{Code: 500, Message: "INTERNAL"}
	pr.world.InjectError("a", tg.MethodGetChatHistory, unavailable, 1_000_000)
	pr.world.InjectError("b", tg.MethodGetChatHistory, unavailable, 1_000_000)
	return func() { pr.world.InjectError("b", tg.MethodGetChatHistory, nil, 0) }
}

// heldUntilReconciled posts a package in pr's source, checks that its
// delivery waits for the destination's reconciliation, frees b to run
// it, and waits for the delivery.
func heldUntilReconciled(t *testing.T, st *store.Store, pr pair, free func()) {
	t.Helper()
	ctx := context.Background()
	posted := postTars(pr.world, pr.src, "r", 1)
	waitCatalogued(t, st, posted[0].Key())
	if n, err := st.QueuedDeliveries(ctx, ""); err != nil || n != 1 {
		t.Fatalf("queued deliveries = %d (%v); want the package's, held by the reconciliation", n, err)
	}
	if n := countDocuments(pr.world, pr.dest); n != 0 {
		t.Fatalf("destination holds %d documents before its reconciliation, want none", n)
	}
	free()
	waitDocuments(t, pr.world, pr.dest, 1)
	checkOnce(t, pr.world, pr.dest, posted)
	if pending, err := st.ReconcilePending(ctx, pr.dest); err != nil || pending {
		t.Errorf("reconciliation still pending (%v) after the delivery went", err)
	}
}
