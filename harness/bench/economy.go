package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"stashd/daemon"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// The baseline world: 49 channels and one forum with 1,086 topics, watched
// by one account, as a topic-by-topic archive ingester meets it.
const (
	economyChannels = 49
	economyTopics   = 1086
)

// Cycle kinds and strategies, as the summary names them.
const (
	cycleIdle    = "idle"
	cycleRestart = "restart"
	cycleOneNew  = "one_new"

	stratPoll = "poll"
	stratSkip = "skip_rules"
	stratOurs = "stashd"
)

// ingestMethods fetch and deliver a package once it is found; every
// strategy makes the same ones, so economy counts the others: the calls
// spent finding out what is new.
var ingestMethods = map[string]bool{
	tg.MethodDownloadFile: true, tg.MethodCancelDownloadFile: true, tg.MethodDeleteFile: true, tg.MethodSendMessage: true,
	tg.MethodSendMessageAlbum: true,
	tg.MethodCreateForumTopic: true,
}

// idleByMethod prefixes the keys of stashd's idle calls by method.
const idleByMethod = "idle_by:"

func discoveryCalls(before, after map[string]int) int {
	n := 0
	for m, c := range after {
		if !ingestMethods[m] {
			n += c - before[m]
		}
	}
	return n
}

// serverCalls counts the discovery calls that reach Telegram's servers
// (TDLib answers getChat and openChat locally).
func serverCalls(before, after map[string]int) int {
	n := 0
	for m, c := range after {
		if !ingestMethods[m] && !tg.LocalMethod(m) {
			n += c - before[m]
		}
	}
	return n
}

// economyWorld builds the baseline's world: every channel and 50 topics hold
// a few archives; every topic has its creation message.
type economyWorld struct {
	e      *env
	chans  []tg.ChatID
	forum  tg.ChatID
	topics []int64
	docs   int
}

func (r *runner) newEconomyWorld(ctx context.Context) (*economyWorld, error) {
	e, err := r.newEnv(ctx, "economy", 1, tgsim.Config{Seed: 3})
	if err != nil {
		return nil, err
	}
	w := &economyWorld{e: e}
	for i := range economyChannels {
		c := e.addSource(0, tg.KindChannel, fmt.Sprintf("channel %d", i))
		w.chans = append(w.chans, c)
		for range 2 {
			e.postTarGz(c, 0, w.docs)
			w.docs++
		}
	}
	w.forum = e.addSource(0, tg.KindForum, "forum")
	// The quick run has a smaller forum; the figures are then not the
	// baseline's.
	topics := economyTopics
	if r.o.Quick {
		topics = 100
	}
	for i := range topics {
		t := e.world.AddTopic(w.forum, fmt.Sprintf("topic %d", i))
		w.topics = append(w.topics, t)
		if i%20 == 0 {
			e.postTarGz(w.forum, t, w.docs)
			w.docs++
		}
	}
	return w, nil
}

// economy measures item 1: Telegram calls per cycle (ingest calls left out)
// for the baseline's polling scheduler, its skip rules and stashd, for an idle
// cycle, the first cycle after a restart and a cycle with one new message
// in one topic.
func (r *runner) economy(ctx context.Context) error {
	w, err := r.newEconomyWorld(ctx)
	if err != nil {
		return err
	}
	defer w.e.close(ctx)
	out := map[string]map[string]float64{cycleIdle: {}, cycleRestart: {}, cycleOneNew: {}}
	extra := map[string]map[string]float64{} // strategy -> restart_server, one_new_cycles
	for _, s := range []*seedScheduler{{skip: false}, {skip: true}} {
		name := stratPoll
		if s.skip {
			name = stratSkip
		}
		res, err := s.measure(ctx, w)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r.progress("economy: %s measured", name)
		split(res, name, out, extra)
	}
	r.progress("economy: starting stashd")
	res, err := r.stashdEconomy(ctx, w)
	if err != nil {
		return fmt.Errorf("stashd: %w", err)
	}
	split(res, stratOurs, out, extra)
	for _, k := range []string{cycleIdle, cycleRestart, cycleOneNew} {
		l := Line{Item: ItemEconomy, Unit: "calls", Stashd: out[k][stratOurs], Baseline: out[k][stratPoll],
			Ratio: ratio(out[k][stratOurs], out[k][stratPoll])}
		switch k {
		case cycleIdle:
			l.What = "calls per idle cycle (vs polling)"
			l.Note = fmt.Sprintf("baseline's skip rules: %.0f calls (average over %d cycles: cold sources are checked every %dth cycle)",
				out[k][stratSkip], 2*backoffEvery, backoffEvery)
			var by []string
			for key, v := range extra[stratOurs] {
				if m, ok := strings.CutPrefix(key, idleByMethod); ok {
					by = append(by, fmt.Sprintf("%s %.0f", m, v))
				}
			}
			if len(by) > 0 {
				slices.Sort(by)
				l.Note += "; stashd's calls over its 10 idle cycles: " + strings.Join(by, ", ")
			}
		case cycleRestart:
			l.What = "calls, first cycle after a restart (vs polling)"
			l.Note = fmt.Sprintf("server requests: stashd %.0f, polling %.0f, skip rules %.0f; skip rules: %.0f calls, "+
				"because its cold sources wait for their turn (they are not looked at for up to %d cycles); stashd checks every source once with the local getChat",
				extra[stratOurs][cycleRestart+"_server"], extra[stratPoll][cycleRestart+"_server"], extra[stratSkip][cycleRestart+"_server"],
				out[k][stratSkip], backoffEvery-1)
		case cycleOneNew:
			l.What = "calls to find one new message in one topic (vs polling)"
			l.Note = fmt.Sprintf("skip rules: %.0f calls per cycle over the %.0f cycles (%.0f min) it took to find it; polling finds it in its next cycle; stashd: the update, with no scan",
				out[k][stratSkip], extra[stratSkip][cycleOneNew+"_cycles"], extra[stratSkip][cycleOneNew+"_cycles"]*cycleEvery.Minutes())
		}
		r.add(l)
	}
	r.rep.Summary.Economy = out
	return nil
}

// stashdEconomy runs the daemon on the world: it catches up the backlog,
// then the calls of ten idle catch-up cycles, of a restart until its first
// cycle completes, and of finding one new message in a topic are counted.
func (r *runner) stashdEconomy(ctx context.Context, w *economyWorld) (map[string]float64, error) {
	e := w.e
	cfg := e.daemonConfig(4, 0)
	d, err := e.start(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	stop := func() {
		if d != nil {
			d.Shutdown(context.Background())
		}
	}
	defer func() { stop() }()
	if n, err := e.waitCount(ctx, countPackages, w.docs, 2*time.Minute); err != nil || n < w.docs {
		return nil, fmt.Errorf("backlog catalogued %d of %d: %v", n, w.docs, err)
	}
	cycles := func(d *daemon.Daemon, n int) error {
		for range n {
			select {
			case <-d.CatchupCycles()[0]:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Minute):
				return fmt.Errorf("no catch-up cycle within a minute")
			}
		}
		return nil
	}
	r.progress("economy: stashd caught up the backlog")
	if err := cycles(d, 2); err != nil { // settle
		return nil, err
	}
	out := map[string]float64{}
	const idleCycles = 10
	before := e.world.TotalCalls()
	if err := cycles(d, idleCycles); err != nil {
		return nil, err
	}
	after := e.world.TotalCalls()
	out[cycleIdle] = float64(discoveryCalls(before, after)) / idleCycles
	// A figure above zero says which calls made it.
	for m, c := range after {
		if !ingestMethods[m] && c > before[m] {
			out[idleByMethod+m] = float64(c - before[m])
		}
	}

	// One new message in one topic: the calls until it is catalogued and
	// the next catch-up cycle has completed.
	before = e.world.TotalCalls()
	e.postTarGz(w.forum, w.topics[len(w.topics)/2], w.docs)
	w.docs++
	if n, err := e.waitCount(ctx, countPackages, w.docs, time.Minute); err != nil || n < w.docs {
		return nil, fmt.Errorf("new message catalogued %d of %d: %v", n, w.docs, err)
	}
	if err := cycles(d, 1); err != nil {
		return nil, err
	}
	out[cycleOneNew] = float64(discoveryCalls(before, e.world.TotalCalls()))

	// Restart: every call from the new process's start to the end of its
	// first catch-up cycle.
	d.Shutdown(context.Background())
	d = nil
	before = e.world.TotalCalls()
	var first <-chan struct{}
	d, err = e.start(ctx, cfg, func(d *daemon.Daemon) { first = d.CatchupCycles()[0] })
	if err != nil {
		return nil, err
	}
	select {
	case <-first:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("no catch-up cycle within a minute of the restart")
	}
	after = e.world.TotalCalls()
	out[cycleRestart] = float64(discoveryCalls(before, after))
	out[cycleRestart+"_server"] = float64(serverCalls(before, after))
	return out, nil
}

// seedScheduler is the baseline scheduler of a topic-by-topic archive
// ingester, for measurement only: every cycle walks every channel and every forum topic
// and scans it with searchChatMessages from its watermark ("today"). With
// skip set it applies the baseline's skip rules first: a source scanned less
// than skipWindow ago and found idle is skipped; one with backoffAfter
// empty scans in a row is scanned only every backoffEvery-th cycle; else
// getChat (getForumTopic for a topic) short-circuits when last_message is
// at the watermark. Cycles run every cycleEvery on a virtual clock; state
// survives a restart (the baseline keeps it in a database), the cycle counter
// does not.
type seedScheduler struct {
	skip  bool
	c     *tgsim.Client
	now   time.Time
	cycle int
	state map[scanKey]*scanState
}

type scanKey struct {
	chat   tg.ChatID
	thread int64
}

type scanState struct {
	watermark int64
	scanned   time.Time
	found     bool
	empty     int
}

const (
	skipWindow   = 5 * time.Minute
	backoffAfter = 5
	backoffEvery = 5
	cycleEvery   = 5 * time.Minute
)

func (s *seedScheduler) measure(ctx context.Context, w *economyWorld) (map[string]float64, error) {
	world := w.e.world
	s.now, s.state = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), map[scanKey]*scanState{}
	if err := s.start(ctx, world); err != nil {
		return nil, err
	}
	defer func() { s.c.Close() }()
	// Warm up: the first cycle takes the backlog, then the sources go
	// idle and cold.
	for range 2 * backoffAfter {
		if err := s.runCycle(ctx, w); err != nil {
			return nil, err
		}
	}
	out := map[string]float64{}
	const idleCycles = 2 * backoffEvery
	before := world.TotalCalls()
	for range idleCycles {
		if err := s.runCycle(ctx, w); err != nil {
			return nil, err
		}
	}
	out[cycleIdle] = float64(discoveryCalls(before, world.TotalCalls())) / idleCycles

	// One new message in one topic: the calls of the cycles until a cycle
	// has found it, averaged over those cycles.
	topic := w.topics[len(w.topics)/3]
	msg := world.Post(w.forum, topic, tgsim.Post{Text: "new"})
	before = world.TotalCalls()
	found := 0
	for found = 1; ; found++ {
		if err := s.runCycle(ctx, w); err != nil {
			return nil, err
		}
		if s.state[scanKey{w.forum, topic}].watermark >= msg.ID.ServerID() {
			break
		}
	}
	out[cycleOneNew] = float64(discoveryCalls(before, world.TotalCalls())) / float64(found)
	out[cycleOneNew+"_cycles"] = float64(found)

	// Restart an hour later: a new client, the cycle counter from zero.
	s.c.Close()
	s.now = s.now.Add(time.Hour)
	s.cycle = 0
	before = world.TotalCalls()
	if err := s.start(ctx, world); err != nil {
		return nil, err
	}
	if err := s.runCycle(ctx, w); err != nil {
		return nil, err
	}
	after := world.TotalCalls()
	out[cycleRestart] = float64(discoveryCalls(before, after))
	out[cycleRestart+"_server"] = float64(serverCalls(before, after))
	return out, nil
}

func (s *seedScheduler) start(ctx context.Context, world *tgsim.World) error {
	s.c = world.Client("acct1")
	if err := s.c.LoadChats(ctx); err != nil {
		return err
	}
	_, err := s.c.GetMe(ctx)
	return err
}

func (s *seedScheduler) runCycle(ctx context.Context, w *economyWorld) error {
	s.cycle++
	s.now = s.now.Add(cycleEvery)
	for _, c := range w.chans {
		if err := s.visit(ctx, scanKey{chat: c}); err != nil {
			return err
		}
	}
	for _, t := range w.topics {
		if err := s.visit(ctx, scanKey{chat: w.forum, thread: t}); err != nil {
			return err
		}
	}
	return nil
}

// visit applies the rules to one channel or topic and scans it if due.
func (s *seedScheduler) visit(ctx context.Context, k scanKey) error {
	st := s.state[k]
	if st == nil {
		st = &scanState{}
		s.state[k] = st
	}
	if s.skip && !st.scanned.IsZero() {
		if s.now.Sub(st.scanned) < skipWindow && !st.found {
			return nil // recently scanned and idle
		}
		if st.empty >= backoffAfter && s.cycle%backoffEvery != 0 {
			return nil // cold: not its turn
		}
		var last int64
		if k.thread == 0 {
			c, err := s.c.GetChat(ctx, k.chat)
			if err != nil {
				return err
			}
			last = c.LastMessageID.ServerID()
		} else {
			t, err := s.c.GetForumTopic(ctx, k.chat, k.thread)
			if err != nil {
				return err
			}
			last = t.LastMessageID.ServerID()
		}
		if last != 0 && last <= st.watermark {
			st.scanned, st.found = s.now, false
			st.empty++
			return nil
		}
	}
	found, err := s.scan(ctx, k, st)
	if err != nil {
		return err
	}
	st.scanned, st.found = s.now, found
	if found {
		st.empty = 0
	} else {
		st.empty++
	}
	return nil
}

// scan pages searchChatMessages forward from the watermark, as the seed
// does, and reports whether it found anything.
func (s *seedScheduler) scan(ctx context.Context, k scanKey, st *scanState) (bool, error) {
	found := false
	for {
		msgs, err := s.c.SearchChatMessages(ctx, tg.Search{
			Chat: k.chat, ThreadID: k.thread, FromMessageID: tg.MessageIDFromServer(max(st.watermark, 1)),
			Offset: -(tg.MaxSearchLimit - 1), Limit: tg.MaxSearchLimit,
		})
		if err != nil {
			return found, err
		}
		n := 0
		for _, m := range msgs {
			if id := m.ID.ServerID(); id > st.watermark {
				st.watermark = id
				n++
			}
		}
		if n == 0 {
			return found, nil
		}
		found = true
		if n < tg.MaxSearchLimit-1 {
			return found, nil
		}
	}
}

// split files a strategy's figures: the three cycle kinds into out, the
// others into extra.
func split(res map[string]float64, strategy string, out, extra map[string]map[string]float64) {
	for k, v := range res {
		if _, ok := out[k]; ok {
			out[k][strategy] = v
			continue
		}
		if extra[strategy] == nil {
			extra[strategy] = map[string]float64{}
		}
		extra[strategy][k] = v
	}
}
