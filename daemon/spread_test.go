package daemon_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// spreadRun delivers n packages posted in one source, watched by the first
// account, to one destination every account may write to, with a send
// budget of perMinute per account, each account paced on a virtual clock
// of its own. It returns the destination's send log (stamped with the
// sending account's clock) and the clocks' common start.
func spreadRun(t testing.TB, accounts []string, n int, perMinute float64) ([]tgsim.SendRecord, time.Time) {
	t.Helper()
	st := openStore(t, poolConns)
	start := time.Unix(1_700_000_000, 0)
	clocks := map[string]*tg.VirtualClock{}
	for _, a := range accounts {
		clocks[a] = tg.NewVirtualClock(start)
	}
	world := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir(),
		AccountNow: func(account string) time.Time { return clocks[account].Now() }})
	for _, a := range accounts {
		world.AddAccount(a, false)
	}
	src := world.AddChat(tg.KindChannel, "news", accounts...)
	dest := world.AddChat(tg.KindChannel, "mirror", accounts...)
	cfg := daemon.Config{
		Accounts: []daemon.Account{{Name: accounts[0], Sources: []tg.ChatID{src}}}, Destinations: []tg.ChatID{dest},
		Workers: 4, DrainTimeout: 10 * time.Second, SendRate: perMinute, SendInFlight: 3, Registry: prometheus.NewRegistry(),
		SendClock: func(account string) tg.Clock { return clocks[account] },
		Ingest:    ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: 5 * time.Second},
	}
	for _, a := range accounts[1:] {
		other := world.AddChat(tg.KindChannel, a+"'s source", a)
		cfg.Accounts = append(cfg.Accounts, daemon.Account{Name: a, Sources: []tg.ChatID{other}})
	}
	d := daemon.New(cfg, st, func(_ context.Context, account string) (tg.Client, error) { return world.Client(account), nil })
	prepareAndRun(t, d)
	var posted []tg.Message
	for i := range n {
		name := fmt.Sprintf("p%02d.tar", i)
		posted = append(posted, world.Post(src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})}))
	}
	for _, m := range posted {
		waitHandled(t, st, m.Key()) // a package is handled once delivered
	}
	d.Shutdown(context.Background())

	checkOnce(t, world, dest, posted)
	var sends []tgsim.SendRecord
	for _, s := range world.Sends() {
		if s.Chat != dest {
			continue
		}
		sends = append(sends, s)
		// The delivery names the account that sent it, whichever
		// account's stage wrote its intent.
		token := ingest.TokenOf(s.Caption)
		var account string
		if err := st.Pool().QueryRow(context.Background(), `SELECT account FROM deliveries WHERE token = $1`, token).Scan(&account); err != nil {
			t.Fatalf("delivery of token %q: %v", token, err)
		}
		if account != s.Account {
			t.Errorf("delivery sent by account %s names account %s", s.Account, account)
		}
	}
	return sends, start
}

// sendSpan is how long the sends took on the accounts' clocks: from the
// common start to the last send.
func sendSpan(sends []tgsim.SendRecord, start time.Time) time.Duration {
	var last time.Time
	for _, s := range sends {
		if s.At.After(last) {
			last = s.At
		}
	}
	return last.Sub(start)
}

// BenchmarkSpreadSends prints the simulated time of 1,000 deliveries at 40
// a minute per account with one and two accounts, through the whole daemon
// (the second account sends what spreading gives it), against the budget's
// bound (1,000 / (40 × accounts) minutes). Printed, not asserted.
func BenchmarkSpreadSends(b *testing.B) {
	const n, perMinute = 1000, 40.0
	for _, accounts := range [][]string{{"a"}, {"a", "b"}} {
		b.Run(fmt.Sprintf("accounts=%d", len(accounts)), func(b *testing.B) {
			for range b.N {
				sends, start := spreadRun(b, accounts, n, perMinute)
				took := sendSpan(sends, start)
				bound := time.Duration(float64(time.Minute) * n / (perMinute * float64(len(accounts))))
				per := map[string]int{}
				for _, s := range sends {
					per[s.Account]++
				}
				b.ReportMetric(took.Minutes(), "sim-min")
				b.ReportMetric(took.Minutes()/bound.Minutes(), "x-bound")
				b.Logf("%d deliveries, %d account(s) at %.0f/min: %.1f simulated minutes; the budget's bound is %.1f (ratio %.2f); sends by account %v",
					n, len(accounts), perMinute, took.Minutes(), bound.Minutes(), took.Minutes()/bound.Minutes(), per)
			}
		})
	}
}

// With several accounts able to write to a destination, one route's sends
// spread over them: both accounts send, each within its own budget (send
// times from the simulator, on each account's virtual clock), and the
// deliveries take about half the time one account needs.
func TestSendsSpreadOverAccountsWithinEachBudget(t *testing.T) {
	t.Parallel()
	const n, perMinute = 24, 40.0
	interval := time.Duration(float64(time.Minute) / perMinute)

	one, start := spreadRun(t, []string{"a"}, n, perMinute)
	two, _ := spreadRun(t, []string{"a", "b"}, n, perMinute)

	by := map[string][]time.Time{}
	for _, s := range two {
		by[s.Account] = append(by[s.Account], s.At)
	}
	if len(by["a"]) == 0 || len(by["b"]) == 0 {
		t.Fatalf("sends by account: a %d, b %d; want both to send", len(by["a"]), len(by["b"]))
	}
	// The budget's default jitter varies each spacing by up to an eighth
	// either way (tg.SendBudgetConfig.Jitter 0.25) and never lets a
	// minute hold more than perMinute sends.
	minGap := interval * 7 / 8
	for account, times := range by {
		slices.SortFunc(times, time.Time.Compare)
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap < minGap {
				t.Errorf("account %s sent %v after its previous send; its budget spaces sends at least %v apart", account, gap, minGap)
			}
			if j := i + int(perMinute); j < len(times) && times[j].Sub(times[i]) < time.Minute {
				t.Errorf("account %s sent %d in less than a minute; its budget allows %.0f", account, int(perMinute)+1, perMinute)
			}
		}
	}
	oneSpan, twoSpan := sendSpan(one, start), sendSpan(two, start)
	t.Logf("%d deliveries at %.0f/min per account: one account %v, two accounts %v (a %d, b %d sends)",
		n, perMinute, oneSpan, twoSpan, len(by["a"]), len(by["b"]))
	if oneSpan < time.Duration(n-1)*minGap {
		t.Errorf("one account sent %d in %v, faster than its budget allows (%v)", n, oneSpan, time.Duration(n-1)*minGap)
	}
	if twoSpan > oneSpan*3/4 {
		t.Errorf("two accounts took %v, one %v: spreading should take about half", twoSpan, oneSpan)
	}
}

// Spread over two accounts, a set's parts still reach a destination in
// order: every part of one package goes there through one account. (A set
// is one album, one send; the budget, 60 a minute, is tight enough that the
// first account's is busy when the next set is ready.)
func TestSpreadKeepsEachSetsPartsOnOneAccountInOrder(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 9, "a", "b")
	world, src, dest := pr.world, pr.src, pr.dest
	cfg := daemon.Config{
		Accounts:     pr.accounts(),
		Destinations: []tg.ChatID{dest}, Workers: 4, DrainTimeout: 10 * time.Second, SendRate: 60, SendInFlight: 2,
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: 5 * time.Second},
	}
	d := daemon.New(cfg, st, pr.dial)
	prepareAndRun(t, d)
	for _, k := range postSets(world, src, 4) {
		waitHandled(t, st, k)
	}
	d.Shutdown(context.Background())

	sender := map[string]map[string]bool{} // set -> accounts that sent its parts
	for _, s := range world.Sends() {
		if s.Chat != dest {
			continue
		}
		set := s.Caption[:4]
		if sender[set] == nil {
			sender[set] = map[string]bool{}
		}
		sender[set][s.Account] = true
	}
	used := map[string]bool{}
	for set, accounts := range sender {
		if len(accounts) != 1 {
			t.Errorf("%s was sent by %v; want one account for all its parts", set, accounts)
		}
		for a := range accounts {
			used[a] = true
		}
	}
	if !used["a"] || !used["b"] {
		t.Errorf("accounts that sent: %v; want both", used)
	}
	checkPartOrder(t, world, dest, 12)
}

// A delivery is put off while every account that could send to its
// destination waits out a 429 there: an account found to be no member of
// the destination does not count as one that could. Here b reads the
// source but is no member of the destination, and a's sends there are
// paused by the chat's limit.
func TestDestPauseLeavesOutAccountsThatCannotSendThere(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	pr := newPair(t, 13, "a")
	world, src, dest := pr.world, pr.src, pr.dest
	world.LimitChatSends(dest, 1.0/600, 1)
	d := daemon.New(daemon.Config{
		Accounts:     pr.accounts(),
		Destinations: []tg.ChatID{dest}, Workers: 2, DrainTimeout: time.Second, SendRate: 600, Registry: prometheus.NewRegistry(),
		Instance: "only",
	}, st, pr.dial)
	prepareAndRun(t, d)
	defer d.Kill()

	// The first package takes the chat's one send; the second meets its
	// 429.
	name := func(i int) string { return fmt.Sprintf("q%02d.tar", i) }
	first := world.Post(src, 0, tgsim.Post{FileName: name(0), Data: archivetest.Tar([]archivetest.File{{Name: name(0), Data: []byte("0")}})})
	waitHandled(t, st, first.Key())
	world.Post(src, 0, tgsim.Post{FileName: name(1), Data: archivetest.Tar([]archivetest.File{{Name: name(1), Data: []byte("1")}})})
	deadline := time.Now().Add(time.Minute)
	for world.ChatFlooded(dest) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second send never met the chat's limit")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// a's session pauses the chat once the refusal reaches it, just after
	// the simulator counted it.
	for wait := time.Duration(0); wait < time.Minute; wait = daemon.DestPause(d, "a", dest) {
		if time.Now().After(deadline) {
			t.Fatalf("DestPause = %v with a paused and b no member of the destination; want a's pause of minutes", wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
