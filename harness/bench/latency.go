package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"stashd/daemon"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// latencyResult is one run at an offered rate.
type latencyResult struct {
	Rate                float64
	Archives, Missing   int
	Catalogued, Deliver quantiles
	// Trips are the store's round trips per archive, from the first post
	// until every archive was delivered (none beside a backlog).
	Trips float64
	// BacklogDone counts the backlog's packages catalogued while the
	// messages were offered, BacklogLeft those still to catalogue at the
	// end of it.
	BacklogDone, BacklogLeft int
}

// quantiles are p50, p99 and max in milliseconds.
type quantiles struct{ P50, P99, Max float64 }

func quantilesOf(ms []float64) quantiles {
	if len(ms) == 0 {
		return quantiles{math.NaN(), math.NaN(), math.NaN()}
	}
	slices.Sort(ms)
	at := func(q float64) float64 { return ms[min(len(ms)-1, int(math.Ceil(q*float64(len(ms))))-1)] }
	return quantiles{at(0.50), at(0.99), ms[len(ms)-1]}
}

// archiveEvery: one message in ten is an archive, the rest text, as in the
// catch-up backlog.
const archiveEvery = 10

// runLatency offers rate messages/s for d to the daemon running two
// accounts (four channels each, realtime updates), then measures, for every
// archive, event (the post) → catalogued (the package row) and →
// delivered (the destination message recorded). The catalogue's
// timestamps are its transactions' start times, a little before their
// commits. With a backlog, the first account has a fifth channel holding
// that many archives when the daemon starts: its catch-up ingests them
// while the messages are offered to the second account's channels alone.
func (r *runner) runLatency(ctx context.Context, rate float64, d time.Duration, backlog int) (latencyResult, error) {
	e, err := r.newEnv(ctx, "latency", 2, tgsim.Config{Seed: 4})
	if err != nil {
		return latencyResult{}, err
	}
	defer e.close(ctx)
	var srcs []tg.ChatID
	for a := range 2 {
		for i := range 4 {
			srcs = append(srcs, e.addSource(a, tg.KindChannel, fmt.Sprintf("source %d.%d", a, i)))
		}
	}
	for _, src := range srcs {
		e.world.Post(src, 0, tgsim.Post{Text: "before the start"})
	}
	var backlogSrc tg.ChatID
	if backlog > 0 {
		backlogSrc = e.addSource(0, tg.KindChannel, "backlog")
		for j := range backlog {
			e.postTarGz(backlogSrc, 0, backlogBase+j)
		}
		srcs = srcs[4:] // the live messages go to the second account
	}
	dm, err := e.start(ctx, e.daemonConfig(4, 0), nil)
	if err != nil {
		return latencyResult{}, err
	}
	defer dm.Shutdown(context.Background())
	// Measure the steady state: every source caught up and synced, so
	// that events take the realtime path (but the backlog's).
	synced := "" // every account
	if backlog > 0 {
		synced = e.accounts[1].Name
	}
	if err := waitSynced(ctx, dm, synced, 30*time.Second); err != nil {
		return latencyResult{}, err
	}
	ofSources := func(q string) string { return q + " AND p.origin_chat_id IN (" + chatList(srcs) + ")" }
	backlogQuery := fmt.Sprintf(`SELECT count(*) FROM packages WHERE origin_chat_id = %d`, int64(backlogSrc))
	backlog0 := 0
	if backlog > 0 {
		if backlog0, err = e.count(ctx, backlogQuery); err != nil {
			return latencyResult{}, err
		}
	}

	posted := map[tg.MessageKey]time.Time{}
	total := int(rate * d.Seconds())
	// The archives are made before the clock starts: making them on the
	// way would load the daemon's heap (the same process here) with the
	// bench's garbage.
	data := make(map[int][]byte, total/archiveEvery+1)
	var tgz smallTarGz
	for i := 0; i < total; i += archiveEvery {
		data[i] = tgz.make(i)
	}
	start, by0 := time.Now(), e.trips.snapshot()
	archives := 0
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	for i := 0; i < total; {
		select {
		case <-ctx.Done():
			return latencyResult{}, ctx.Err()
		case <-t.C:
		}
		// Catch up with the schedule: the ticker may fall behind.
		due := min(total, int(rate*time.Since(start).Seconds()))
		for ; i < due; i++ {
			src := srcs[i%len(srcs)]
			var m tg.Message
			if i%archiveEvery == 0 {
				m = e.world.Post(src, 0, tgsim.Post{FileName: tarGzName(i), Data: data[i]})
				delete(data, i)
				archives++
			} else {
				m = e.world.Post(src, 0, tgsim.Post{Text: "chatter " + strconv.Itoa(i)})
			}
			if m.Document != nil {
				posted[m.Key()] = time.Now()
			}
		}
	}
	res := latencyResult{Rate: rate, Archives: archives}
	if backlog > 0 {
		done, err := e.count(ctx, backlogQuery)
		if err != nil {
			return latencyResult{}, err
		}
		res.BacklogDone, res.BacklogLeft = done-backlog0, backlog-done
	}
	n, err := e.waitCount(ctx, ofSources(`SELECT count(*) FROM packages p WHERE true`), archives, 2*time.Minute)
	if err != nil {
		return latencyResult{}, err
	}
	res.Missing = archives - n
	// The packages catalogued, each delivered once.
	if _, err := e.waitCount(ctx, ofSources(`SELECT count(*) FROM deliveries d JOIN packages p ON p.id = d.package_id WHERE d.state = 'sent'`), n, 2*time.Minute); err != nil {
		return latencyResult{}, err
	}
	if backlog == 0 {
		var table string
		res.Trips, table = e.trips.perPackage(by0, n)
		r.progress("latency at %.0f msg/s: round trips per package by statement (%d packages):\n%s", rate, n, table)
	}
	rows, err := e.pool.Query(ctx, `SELECT p.origin_chat_id, p.origin_message_id, p.created_at, max(d.sent_at)
		FROM packages p LEFT JOIN deliveries d ON d.package_id = p.id AND d.state = 'sent'
		GROUP BY p.id`)
	if err != nil {
		return latencyResult{}, fmt.Errorf("read catalogue times: %w", err)
	}
	defer rows.Close()
	var cat, del []float64
	for rows.Next() {
		var chat, msg int64
		var created time.Time
		var sent *time.Time
		if err := rows.Scan(&chat, &msg, &created, &sent); err != nil {
			return latencyResult{}, err
		}
		at, ok := posted[tg.MessageKey{Chat: tg.ChatID(chat), Message: tg.MessageID(msg)}]
		if !ok {
			continue
		}
		cat = append(cat, float64(created.Sub(at))/float64(time.Millisecond))
		if sent != nil {
			del = append(del, float64(sent.Sub(at))/float64(time.Millisecond))
		}
	}
	if err := rows.Err(); err != nil {
		return latencyResult{}, err
	}
	res.Catalogued, res.Deliver = quantilesOf(cat), quantilesOf(del)
	return res, nil
}

// latency measures item 4: p50/p99/max of event → catalogued and →
// delivered at 1,000 messages/s for 60 s on two accounts (goal: p99 ≤ 50 ms
// catalogued), and the knee: the highest offered rate of a sweep whose
// catalogued p99 stays within 50 ms.
func (r *runner) latency(ctx context.Context) error {
	rate, d := 1000.0, 60*time.Second
	sweep, sweepFor := []float64{100, 250, 500, 1000}, 10*time.Second
	if r.o.Quick {
		rate, d = 200, time.Second
		sweep, sweepFor = []float64{100}, time.Second
	}
	main, err := r.runLatency(ctx, rate, d, 0)
	if err != nil {
		return err
	}
	note := fmt.Sprintf("%d tar.gz archives (one message in %d), 2 accounts, 4 workers each; p50 %.1f ms, max %.1f ms",
		main.Archives, archiveEvery, main.Catalogued.P50, main.Catalogued.Max)
	if main.Missing > 0 {
		note += fmt.Sprintf("; %d not catalogued within 2 min of the end (left out)", main.Missing)
	}
	r.add(Line{Item: ItemLatency, What: fmt.Sprintf("event → catalogued p99 at %.0f msg/s for %.0fs", rate, d.Seconds()), Unit: "ms",
		Stashd: main.Catalogued.P99, Baseline: nanRatio, Ratio: nanRatio, Goal: "<= 50", Note: note})
	r.add(Line{Item: ItemLatency, What: fmt.Sprintf("event → delivered p99 at %.0f msg/s", rate), Unit: "ms",
		Stashd: main.Deliver.P99, Baseline: nanRatio, Ratio: nanRatio,
		Note: fmt.Sprintf("p50 %.1f ms, max %.1f ms", main.Deliver.P50, main.Deliver.Max)})
	r.add(Line{Item: ItemLatency, What: fmt.Sprintf("PostgreSQL round trips per package on the realtime path at %.0f msg/s", rate), Unit: "trips",
		Stashd: main.Trips, Baseline: nanRatio, Ratio: nanRatio,
		Note: "as the ingest item's figure, for archives that arrive while the daemon runs (each taken from the listener's queue and " +
			"delivered as it comes, no backlog to take locks and write intents ahead in); no goal"})
	knee := 0.0
	var steps []string
	for _, rt := range sweep {
		res, err := r.runLatency(ctx, rt, sweepFor, 0)
		if err != nil {
			return err
		}
		steps = append(steps, fmt.Sprintf("%.0f/s: p99 %.1f ms", rt, res.Catalogued.P99))
		if res.Missing == 0 && res.Catalogued.P99 <= 50 {
			knee = rt
		}
	}
	r.add(Line{Item: ItemLatency, What: "knee: highest offered rate with catalogued p99 ≤ 50 ms", Unit: "msg/s",
		Stashd: knee, Baseline: nanRatio, Ratio: nanRatio,
		Note: fmt.Sprintf("sweep of %.0fs runs: %v", sweepFor.Seconds(), steps)})
	r.rep.Summary.LatencyP99Ms = ptr(main.Catalogued.P99)
	// The same offered load on one account while the other's catch-up
	// ingests a backlog as fast as the machine allows (a simulator with no
	// latency, no request limit): the live messages' commits wait for
	// flushers that carry the backlog's large group commits, and the two
	// share the CPU. A worst case; no goal.
	bl, blFor, blRate := 80000, 10*time.Second, rate
	if r.o.Quick {
		bl, blFor = 200, time.Second
	}
	beside, err := r.runLatency(ctx, blRate, blFor, bl)
	if err != nil {
		return err
	}
	r.add(Line{Item: ItemLatency, What: fmt.Sprintf("event → catalogued p99 at %.0f msg/s on one account beside another's backlog", blRate), Unit: "ms",
		Stashd: beside.Catalogued.P99, Baseline: main.Catalogued.P99, Ratio: nanRatio,
		Note: fmt.Sprintf("for %.0fs, %d archives; baseline: the same load on two accounts with no backlog (above). The other account's catch-up "+
			"catalogued %d of a %d-archive backlog meanwhile, %d still to do at the end; p50 %.1f ms, max %.1f ms; delivered p99 %.1f ms; no goal",
			blFor.Seconds(), beside.Archives, beside.BacklogDone, bl, beside.BacklogLeft, beside.Catalogued.P50, beside.Catalogued.Max, beside.Deliver.P99)})
	return nil
}

// backlogBase numbers the backlog's archives apart from the live ones.
const backlogBase = 1 << 24

// chatList is chats as a list for an SQL IN.
func chatList(chats []tg.ChatID) string {
	out := make([]string, len(chats))
	for i, c := range chats {
		out[i] = strconv.FormatInt(int64(c), 10)
	}
	return strings.Join(out, ", ")
}

// waitSynced waits until no source of the daemon is dirty, or none of
// account's when it is not "".
func waitSynced(ctx context.Context, d *daemon.Daemon, account string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		dirty := 0
		for _, st := range d.Status() {
			if account == "" || st.Account == account {
				dirty += st.Dirty
			}
		}
		if dirty == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d sources still dirty after %s", dirty, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
