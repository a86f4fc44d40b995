package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"stashd/daemon"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// telegramLimit is the per-account request limit the simulator enforces in
// items 5 and 7, as Telegram does: 20 requests/s, bursts of one second.
const telegramLimit = 20

// limitedResult is one run of catch-up under the limit.
type limitedResult struct {
	// Served counts the server requests Telegram answered (429s excluded)
	// over the window, all accounts together; Refused the 429s.
	Served, Refused int
	// Packages catalogued during the window.
	Packages int
	Window   time.Duration
}

// runLimited builds a backlog for each of accounts accounts (archives
// archives per account, each followed by noise text messages, over four
// channels each), lets Telegram limit every account to telegramLimit
// requests/s, starts the daemon with its default pacing and measures the
// window that follows the start-up.
func (r *runner) runLimited(ctx context.Context, name string, accounts, archives, noise int, window time.Duration) (limitedResult, error) {
	e, err := r.newEnv(ctx, name, accounts, tgsim.Config{Seed: 5})
	if err != nil {
		return limitedResult{}, err
	}
	defer e.close(ctx)
	n := 0
	for a := range accounts {
		var srcs []tg.ChatID
		for i := range 4 {
			srcs = append(srcs, e.addSource(a, tg.KindChannel, fmt.Sprintf("source %d.%d", a, i)))
		}
		for i := range archives {
			src := srcs[i%len(srcs)]
			e.postArchive(src, 0, n)
			n++
			for j := range noise {
				e.world.Post(src, 0, tgsim.Post{Text: "chatter " + strconv.Itoa(j)})
			}
		}
		e.world.LimitRequests(e.accounts[a].Name, telegramLimit, telegramLimit)
	}
	cfg := e.daemonConfig(4, telegramLimit)
	var before map[string]int
	var refusedBefore int
	var start time.Time
	d, err := e.start(ctx, cfg, func(*daemon.Daemon) {
		before, refusedBefore = e.world.TotalCalls(), e.refused()
		start = time.Now()
	})
	if err != nil {
		return limitedResult{}, err
	}
	defer d.Shutdown(context.Background())
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return limitedResult{}, ctx.Err()
	}
	// A window that saw no package (a loaded machine, a short quick run)
	// runs on until the first, at most a minute more: a rate of nothing
	// measures the machine, and a ratio to it is no figure.
	pkgs, err := e.waitCount(ctx, countPackages, 1, time.Minute)
	if err != nil {
		return limitedResult{}, err
	}
	after, refused := e.world.TotalCalls(), e.refused()
	elapsed := time.Since(start)
	res := limitedResult{Refused: refused - refusedBefore, Packages: pkgs, Window: elapsed}
	for m, c := range after {
		if !tg.LocalMethod(m) {
			res.Served += c - before[m]
		}
	}
	res.Served -= res.Refused
	return res, nil
}

func (e *env) refused() int {
	n := 0
	for _, a := range e.accounts {
		n += e.world.RateLimited(a.Name)
	}
	return n
}

// catchup measures item 5: a 50,000-message backlog (10 % archives) caught
// up by one account under Telegram's 20 requests/s limit: achieved server
// requests/s over the limit, and the 429s provoked (goal: none).
func (r *runner) catchup(ctx context.Context) error {
	archives, window := 5000, 30*time.Second
	if r.o.Quick {
		archives, window = 100, 2*time.Second
	}
	res, err := r.runLimited(ctx, "catchup", 1, archives, 9, window)
	if err != nil {
		return err
	}
	rate := float64(res.Served) / res.Window.Seconds()
	r.add(Line{Item: ItemCatchup, What: fmt.Sprintf("catch-up %d-message backlog under %d req/s", archives*10, telegramLimit),
		Unit: "req/s", Stashd: rate, Baseline: telegramLimit, Ratio: rate / telegramLimit, Goal: ">= 0.9",
		Note: fmt.Sprintf("server requests answered over the first %.0fs after start-up (%d packages catalogued); local calls (getChat, openChat, deleteFile) are not limited and not counted",
			res.Window.Seconds(), res.Packages)})
	r.add(Line{Item: ItemCatchup, What: "429s provoked during catch-up", Unit: "",
		Stashd: float64(res.Refused), Baseline: 0, Ratio: nanRatio, Goal: "<= 0"})
	r.rep.Summary.CatchupVsLimit = ptr(rate / telegramLimit)
	return nil
}

// scale measures item 7: packages catalogued per second with 1, 2 and 4
// accounts, each under the same per-account limit, as a ratio to N times
// the one-account figure (goal ≥ 0.9).
func (r *runner) scale(ctx context.Context) error {
	archives, window, counts := 1000, 15*time.Second, []int{1, 2, 4}
	if r.o.Quick {
		archives, window, counts = 40, time.Second, []int{1, 2}
	}
	out := map[string]float64{}
	var one float64
	for _, n := range counts {
		res, err := r.runLimited(ctx, "scale", n, archives, 0, window)
		if err != nil {
			return err
		}
		tput := float64(res.Packages) / res.Window.Seconds()
		if n == 1 {
			one = tput
			r.add(Line{Item: ItemScale, What: "throughput, 1 account", Unit: "pkg/s", Stashd: tput, Baseline: nanRatio, Ratio: nanRatio,
				Note: fmt.Sprintf("%d req/s per account; %d 429s", telegramLimit, res.Refused)})
			continue
		}
		q := ratio(tput, float64(n)*one)
		out[strconv.Itoa(n)] = q
		r.add(Line{Item: ItemScale, What: fmt.Sprintf("throughput, %d accounts (vs %d × 1 account)", n, n), Unit: "pkg/s",
			Stashd: tput, Baseline: float64(n) * one, Ratio: q, Goal: ">= 0.9",
			Note: fmt.Sprintf("%d 429s", res.Refused)})
	}
	r.rep.Summary.AccountsScale = out
	return nil
}
