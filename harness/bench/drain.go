package bench

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// drainPerMinute is the send budget the drain item paces by: a user
// account's order of magnitude.
const drainPerMinute = 40.0

// drain measures item 4: the time the whole daemon takes to deliver a
// backlog at the send budget against the budget's own time (sends over
// PerMinute × accounts), with one account and one destination and with
// two accounts sharing two destinations. Each account paces on a virtual
// clock of its own, which the simulator stamps its sends with, so the
// figure is the pacing's, not the machine's; the run takes as long as the
// slowest account.
func (r *runner) drain(ctx context.Context) error {
	n := 400
	if r.o.Quick {
		n = 20
	}
	worst := math.Inf(1)
	for _, c := range []struct{ accounts, dests int }{{1, 1}, {2, 2}} {
		took, sends, err := r.drainRun(ctx, c.accounts, c.dests, n)
		if err != nil {
			return err
		}
		// Each account's first send goes at the start: n sends take n−1
		// spacings.
		bound := time.Duration(float64(time.Minute) * float64(sends-c.accounts) / (drainPerMinute * float64(c.accounts)))
		l := Line{Item: ItemDrain, What: fmt.Sprintf("drain %d sends, %d account(s), %d destination(s), %.0f/min each", sends, c.accounts, c.dests, drainPerMinute),
			Unit: "min", Stashd: took.Minutes(), Baseline: bound.Minutes(), Ratio: bound.Seconds() / took.Seconds(), Goal: ">= 0.95",
			Note: "simulated minutes on the accounts' clocks from the start to the last send; baseline: (sends − accounts) / (budget × accounts), the budget's own time"}
		worst = min(worst, l.Ratio)
		r.add(l)
	}
	r.rep.Summary.DrainVsSendBudget = ptr(worst)
	return nil
}

// drainRun posts n packages in a source of the first account, each routed
// to every destination, starts the daemon on virtual send clocks and
// returns how long the sends took and how many there were.
func (r *runner) drainRun(ctx context.Context, accounts, dests, n int) (time.Duration, int, error) {
	e, err := r.newEnv(ctx, fmt.Sprintf("drain_%d", accounts), accounts, tgsim.Config{Seed: 5})
	if err != nil {
		return 0, 0, err
	}
	defer e.close(ctx)
	start := time.Unix(1_700_000_000, 0)
	clocks := map[string]*tg.VirtualClock{}
	var names []string
	for _, a := range e.accounts {
		clocks[a.Name] = tg.NewVirtualClock(start)
		names = append(names, a.Name)
	}
	e.world = tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: e.files,
		AccountNow: func(account string) time.Time { return clocks[account].Now() }})
	for _, a := range names {
		e.world.AddAccount(a, false)
	}
	e.dests = nil
	for i := range dests {
		e.dests = append(e.dests, e.world.AddChat(tg.KindChannel, fmt.Sprintf("mirror %d", i), names...))
	}
	src := e.world.AddChat(tg.KindChannel, "news", names...)
	e.accounts[0].Sources = []tg.ChatID{src}
	for i := 1; i < accounts; i++ {
		e.accounts[i].Sources = []tg.ChatID{e.world.AddChat(tg.KindChannel, names[i]+"'s source", names[i])}
	}
	cfg := daemon.Config{
		Accounts: e.accounts, Destinations: e.dests, Workers: 4, DrainTimeout: 10 * time.Second,
		SendRate: drainPerMinute, SendInFlight: 3, Registry: prometheus.NewRegistry(), Logger: r.log,
		SendClock: func(account string) tg.Clock { return clocks[account] },
		Ingest:    ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: 5 * time.Second},
	}
	d := daemon.New(cfg, e.st, func(_ context.Context, account string) (tg.Client, error) { return e.world.Client(account), nil })
	if err := d.Prepare(ctx); err != nil {
		return 0, 0, fmt.Errorf("prepare daemon: %w", err)
	}
	if err := d.Run(); err != nil {
		return 0, 0, fmt.Errorf("run daemon: %w", err)
	}
	defer d.Shutdown(context.Background())
	for i := range n {
		name := fmt.Sprintf("p%04d.tar", i)
		e.world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	}
	want := n * dests
	got, err := e.waitCount(ctx, `SELECT count(*) FROM deliveries WHERE state = 'sent'`, want, 10*time.Minute)
	if err != nil {
		return 0, 0, err
	}
	if got < want {
		return 0, 0, fmt.Errorf("drain: %d of %d deliveries sent", got, want)
	}
	var last time.Time
	sends := 0
	for _, s := range e.world.Sends() {
		sends++
		if s.At.After(last) {
			last = s.At
		}
	}
	return last.Sub(start), sends, nil
}
