package tg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// budgetWorld is a simulated world on a virtual clock with one source per
// account (a file to send) and shared destinations.
type budgetWorld struct {
	w     *tgsim.World
	clock *tg.VirtualClock
	dests []tg.ChatID
	start time.Time
}

func newBudgetWorld(t testing.TB, accounts []string, dests int) *budgetWorld {
	start := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	clock := tg.NewVirtualClock(start)
	bw := &budgetWorld{clock: clock, start: start}
	bw.w = tgsim.NewWorld(tgsim.Config{Seed: 3, Now: clock.Now, FilesDir: t.TempDir()})
	for _, a := range accounts {
		bw.w.AddAccount(a, false)
	}
	for i := range dests {
		bw.dests = append(bw.dests, bw.w.AddChat(tg.KindChannel, fmt.Sprintf("d%d", i), accounts...))
	}
	return bw
}

// sender returns a session of account paced by budget, and the remote id
// of a document it may send.
func (bw *budgetWorld) sender(t testing.TB, account string, budget *tg.SendBudget) (*tg.Session, string) {
	t.Helper()
	src := bw.w.AddChat(tg.KindChannel, "src "+account, account)
	posted := bw.w.Post(src, 0, tgsim.Post{FileName: "a.zip", Data: []byte("PK\x05\x06" + string(make([]byte, 18)))})
	c := bw.w.Client(account)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.LoadChats(context.Background()); err != nil {
		t.Fatal(err)
	}
	m, err := c.GetMessage(context.Background(), src, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	s := tg.NewSession(tg.NewPaced(c, tg.PacedConfig{Account: account, Rate: 1000, Burst: 1000}, nil), func(tg.Update) {})
	s.Budget = budget
	return s, m.Document.File.RemoteID
}

// sendAll sends n messages from s with workers goroutines, spread over the
// destinations, and fails the test on any error.
func (bw *budgetWorld) sendAll(t testing.TB, s *tg.Session, remote string, n, workers int, tag string) {
	t.Helper()
	var wg sync.WaitGroup
	jobs := make(chan int)
	errs := make(chan error, n)
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if _, err := s.Send(context.Background(), bw.dests[i%len(bw.dests)], remote, fmt.Sprintf("%s %d", tag, i)); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// sendTimes returns the times of account's sends in the world, in order.
func (bw *budgetWorld) sendTimes(account string) []time.Time {
	var out []time.Time
	for _, r := range bw.w.Sends() {
		if r.Account == account {
			out = append(out, r.At)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// The budget holds by the simulator's send timestamps: no minute holds
// more than PerMinute sends of an account, consecutive sends are
// 60/PerMinute apart give or take half the jitter, no more than InFlight
// are between sendMessage and their outcome at once, and a backlog drains
// in the budget's own time (n sends in n−1 spacings) within 5 %.
func TestSendBudgetSpacesAnAccountsSends(t *testing.T) {
	t.Parallel()
	bw := newBudgetWorld(t, []string{"a"}, 3)
	rng := rand.New(rand.NewPCG(1, 2))
	budget := tg.NewSendBudget(tg.SendBudgetConfig{Account: "a", PerMinute: 40, InFlight: 3, Clock: bw.clock, Rand: rng.Float64}, nil)
	s, remote := bw.sender(t, "a", budget)
	const n = 120
	bw.sendAll(t, s, remote, n, 6, "a")

	times := bw.sendTimes("a")
	if len(times) != n {
		t.Fatalf("the world accepted %d sends, want %d", len(times), n)
	}
	interval := 1500 * time.Millisecond // 60 s / 40
	for i := 1; i < len(times); i++ {
		gap := times[i].Sub(times[i-1])
		if gap < interval-interval/8 {
			t.Fatalf("sends %d and %d are %v apart; want %v less at most half the jitter", i-1, i, gap, interval)
		}
	}
	if took, bound := times[n-1].Sub(times[0]), time.Duration(n-1)*interval; took > bound*105/100 {
		t.Errorf("%d sends took %v; the budget's own time is %v (ratio %.3f)", n, took, bound, bound.Seconds()/took.Seconds())
	}
	for i := range times {
		j := sort.Search(len(times), func(k int) bool { return !times[k].Before(times[i].Add(time.Minute)) })
		if j-i > 40 {
			t.Fatalf("%d sends in the minute from send %d; the budget is 40", j-i, i)
		}
	}
	// Jitter: the gaps are not all the same.
	if times[2].Sub(times[1]) == times[1].Sub(times[0]) && times[3].Sub(times[2]) == times[1].Sub(times[0]) {
		t.Error("sends are on a fixed beat: no jitter")
	}
}

// InFlight bounds the sends holding a slot: a further Acquire waits.
func TestSendBudgetBoundsSendsInFlight(t *testing.T) {
	t.Parallel()
	clock := tg.NewVirtualClock(time.Unix(0, 0))
	b := tg.NewSendBudget(tg.SendBudgetConfig{PerMinute: 6000, InFlight: 2, Clock: clock}, nil)
	s1, r1, err := b.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s1()
	s2, _, err := b.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s2()
	done, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := b.Acquire(done); err == nil {
		t.Fatal("a third send got a slot with two in flight and InFlight 2")
	}
	r1()
	r1() // a second release does not free another slot
	s3, _, err := b.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s3()
	if _, _, err := b.Acquire(done); err == nil {
		t.Fatal("a double release freed a second slot")
	}
}

// Each account has its own budget: an account whose budget makes its next
// send wait a minute does not hold back another account's sends.
func TestSendBudgetsAreIndependentPerAccount(t *testing.T) {
	t.Parallel()
	w := tgsim.NewWorld(tgsim.Config{Seed: 3, FilesDir: t.TempDir()})
	bw := &budgetWorld{w: w}
	w.AddAccount("a", false)
	w.AddAccount("b", false)
	bw.dests = []tg.ChatID{w.AddChat(tg.KindChannel, "d", "a", "b")}
	sa, ra := bw.sender(t, "a", tg.NewSendBudget(tg.SendBudgetConfig{Account: "a", PerMinute: 1, Jitter: -1}, nil))
	sb, rb := bw.sender(t, "b", tg.NewSendBudget(tg.SendBudgetConfig{Account: "b", PerMinute: 6000, Jitter: -1}, nil))
	if _, err := sa.Send(t.Context(), bw.dests[0], ra, "a 1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	second := make(chan error, 1)
	go func() {
		_, err := sa.Send(ctx, bw.dests[0], ra, "a 2") // its turn is a minute away
		second <- err
	}()
	bw.sendAll(t, sb, rb, 20, 3, "b")
	select {
	case err := <-second:
		t.Fatalf("account a's second send ended (%v) before its minute: b's sends used a's budget", err)
	default:
	}
	if n := len(bw.sendTimes("b")); n != 20 {
		t.Errorf("account b: %d sends accepted, want 20", n)
	}
	cancel()
	if err := <-second; err == nil {
		t.Error("account a's second send went through within its minute")
	}
}

// BenchmarkSendBudget prints the virtual wall time of 1,000 deliveries at
// 40 a minute per account, with one and two accounts, against the budget's
// bound (1,000 / (40 × accounts) minutes). Printed, not asserted.
func BenchmarkSendBudget(b *testing.B) {
	for _, accounts := range []int{1, 2} {
		b.Run(fmt.Sprintf("accounts=%d", accounts), func(b *testing.B) {
			for range b.N {
				var names []string
				for i := range accounts {
					names = append(names, fmt.Sprintf("acct%d", i+1))
				}
				// Accounts share nothing that paces them, so each runs on
				// its own virtual clock (a shared one would need a
				// scheduler); the run takes as long as the slowest.
				var elapsed time.Duration
				var mu sync.Mutex
				var wg sync.WaitGroup
				for i, acct := range names {
					bw := newBudgetWorld(b, []string{acct}, 3)
					rng := rand.New(rand.NewPCG(7, uint64(i)))
					budget := tg.NewSendBudget(tg.SendBudgetConfig{Account: acct, PerMinute: 40, Clock: bw.clock, Rand: rng.Float64}, nil)
					s, remote := bw.sender(b, acct, budget)
					wg.Go(func() {
						bw.sendAll(b, s, remote, 1000/accounts, 3, acct)
						mu.Lock()
						elapsed = max(elapsed, bw.clock.Now().Sub(bw.start))
						mu.Unlock()
					})
				}
				wg.Wait()
				bound := time.Duration(float64(time.Minute) * 1000 / (40 * float64(accounts)))
				b.ReportMetric(elapsed.Minutes(), "sim-min")
				b.ReportMetric(elapsed.Minutes()/bound.Minutes(), "x-bound")
				b.Logf("1000 deliveries, %d account(s) at 40/min: %.1f simulated minutes; the budget's bound is %.1f (ratio %.2f)",
					accounts, elapsed.Minutes(), bound.Minutes(), elapsed.Minutes()/bound.Minutes())
			}
		})
	}
}

// A turn ended without a send goes back: the next send may go at once.
func TestSendBudgetUnusedTurnGoesBack(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	clock := tg.NewVirtualClock(start)
	b := tg.NewSendBudget(tg.SendBudgetConfig{PerMinute: 1, Jitter: -1, Clock: clock}, nil)
	started, done, err := b.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	started()
	done()
	_, done, err = b.Acquire(t.Context()) // waits the minute
	if err != nil {
		t.Fatal(err)
	}
	done() // not sent
	started, done, err = b.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	started()
	done()
	if got := clock.Now().Sub(start); got != time.Minute {
		t.Errorf("three turns, the second unused, took %v of virtual time; want 1m (the unused turn given back)", got)
	}
}
