package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// catalogueTables are the tables the pipeline writes for a package, in
// foreign-key order, with the column that ties a row to its package.
var catalogueTables = []struct{ name, pkgCol string }{
	{"packages", "id"}, {"package_parts", "package_id"}, {"remote_files", "package_id"},
	{"package_files", "package_id"}, {"package_search", "package_id"}, {"source_messages", "package_id"},
	{"deliveries", "package_id"},
}

// ingest measures item 2: packages catalogued per second by the whole
// pipeline (one account, 4 workers, a simulator without latency, every
// package new) against inserting exactly the rows it wrote, read back from
// its catalogue, into a fresh database with COPY (one transaction), with
// one batched INSERT transaction per package over 4 connections (after
// each of ingestPairs runs of the pipeline, which follow one unmeasured
// run: the median pair is reported), and with COPY a page of packages a
// transaction (rawPages).
func (r *runner) ingest(ctx context.Context) error {
	// A backlog long enough that the daemon's start (its lease, its
	// sessions, its pool's first connections: about a quarter of a
	// second to the first package) is a small part of the rate.
	n, zips := 10000, 400
	if r.o.Quick {
		n, zips = 40, 10
	}
	cpu := r.newCPUMeter(ctx)
	// The pipeline and the raw transactions run in turn, ingestPairs
	// times, and the pair whose ratio is the median is the one reported:
	// on a machine whose speed drifts from one run to the next, one pair
	// says more of the drift than of either side.
	pairs := ingestPairs
	if r.o.Quick {
		pairs = 1
	}
	var runs []ingestPair
	warmNote := ""
	if !r.o.Quick {
		warm := n / 5
		warmNote = fmt.Sprintf(", after a warm-up run of the pipeline on %d packages, not measured", warm)
		// A warm-up run of a fifth of the packages, not measured. A
		// pair runs the pipeline first. In the runs whose order was
		// logged, both sides ran faster as the run went on, and the
		// first pair's pipeline, the first run after the server's
		// start, ran 20 to 40 % below the two after it (1,087 against
		// 1,517 and 1,572 pkg/s in one).
		if _, err := r.pipelineRate(ctx, cpu, warm, false, 0); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	for range pairs {
		p, err := r.runPair(ctx, cpu, n)
		if err != nil {
			return err
		}
		runs = append(runs, p)
		r.progress("ingest pair %d of %d: pipeline %.0f pkg/s, raw transactions %.0f pkg/s", len(runs), pairs, p.run.rate, p.tx)
	}
	slices.SortFunc(runs, func(a, b ingestPair) int { return cmp.Compare(a.ratio(), b.ratio()) })
	var each []string
	for _, p := range runs {
		each = append(each, fmt.Sprintf("%.2f (%.0f against %.0f pkg/s)", p.ratio(), p.run.rate, p.tx))
	}
	med := runs[len(runs)/2]
	run, txRate, txCPU := med.run, med.tx, med.txCPU
	ours, rows, stages, trips := run.rate, run.rows, run.stages, run.trips
	copyRate, err := r.rawCopy(ctx, rows, n)
	if err != nil {
		return err
	}
	pageRate, pageCPU, err := r.rawPages(ctx, cpu, rows, n, rawPage)
	if err != nil {
		return err
	}
	raw := math.Max(copyRate, txRate)
	r.add(Line{Item: ItemIngest, What: fmt.Sprintf("ingest %d tar.gz packages (pipeline vs fastest raw insert)", n), Unit: "pkg/s",
		Stashd: ours, Baseline: raw, Ratio: ours / raw, Goal: ">= 0.5",
		Note: fmt.Sprintf("raw: COPY of the same rows in one transaction %.0f pkg/s; one batched INSERT transaction per package over 4 connections %.0f pkg/s. "+
			"The first package's commit began %.0f ms after the daemon's start. Mean time per package and stage: %s", copyRate, txRate, run.first.Seconds()*1000, stages)})
	r.add(Line{Item: ItemIngest, What: "ingest vs per-package raw transactions", Unit: "pkg/s",
		Stashd: ours, Baseline: txRate, Ratio: ours / txRate,
		Note: fmt.Sprintf("same durability unit as the pipeline (one commit per package). The median of %d pairs, each the pipeline then the raw transactions%s: %s",
			len(runs), warmNote, strings.Join(each, ", "))})
	r.add(Line{Item: ItemIngest, What: fmt.Sprintf("ingest vs raw COPY in pages of %d packages a transaction", rawPage), Unit: "pkg/s",
		Stashd: ours, Baseline: pageRate, Ratio: ours / pageRate,
		Note: fmt.Sprintf("the same rows, COPY into each table a page at a time, over 2 connections: the database's share of a page-at-a-time write path; "+
			"no goal. CPU: %s", pageCPU.text)})
	r.add(Line{Item: ItemIngest, What: "CPU per package while catalogued: pipeline vs per-package raw transactions", Unit: "ms",
		Stashd: run.cpu.total, Baseline: txCPU.total, Ratio: nanRatio,
		Note: fmt.Sprintf("pipeline (catch-up, ingest, deliveries; the simulator shares the bench's process): %s. Raw transactions: %s. "+
			"CPU time read from /proc (the server's backends and the bench process) from the start to the last package catalogued",
			run.cpu.text, txCPU.text)})
	// The catalogue's pace while deliveries wait on the shipped send
	// budget, as a busy mirror's do: the sends are then a handful a
	// minute, not the stream the run above makes at the simulator's pace.
	backlog, err := r.pipelineRate(ctx, cpu, n, false, shippedSendRate)
	if err != nil {
		return err
	}
	r.add(Line{Item: ItemIngest, What: fmt.Sprintf("ingest vs per-package raw transactions, deliveries waiting on a send budget of %.0f a minute", shippedSendRate),
		Unit: "pkg/s", Stashd: backlog.rate, Baseline: txRate, Ratio: backlog.rate / txRate,
		Note: fmt.Sprintf("the same %d packages catalogued while their deliveries queue behind the default send budget (no goal; the raw transactions are those above). CPU: %s",
			n, backlog.cpu.text)})
	zipRun, err := r.pipelineRate(ctx, cpu, zips, true, 0)
	if err != nil {
		return err
	}
	zipRate := zipRun.rate
	r.add(Line{Item: ItemIngest, What: fmt.Sprintf("ingest %d lone .zip packages", zips), Unit: "pkg/s",
		Stashd: zipRate, Baseline: ours, Ratio: zipRate / ours,
		Note: "baseline: the tar.gz figure above. A plain .zip may by its name be the last volume of a split zip (.z01…): " +
			"its bytes decide, and one that lists whole is catalogued at once by the workers. A zip's CRCs give it a content signature, " +
			"whose lock and look for a repack cost it one round trip more than a tar.gz"})
	r.add(Line{Item: ItemIngest, What: "PostgreSQL round trips per package (catalogue and delivery)", Unit: "trips",
		Stashd: trips, Baseline: nanRatio, Ratio: nanRatio, Goal: "<= 2",
		Note: "statements, batches and COPYs the daemon's store sent from its start until every package was catalogued and delivered, " +
			"over the packages (a floor: a statement's first prepare on a connection is not counted; lock renewals and catch-up are)"})
	r.rep.Summary.PGRoundTripsPerPackage = ptr(trips)
	r.rep.Summary.IngestVsRawInsert = ptr(ours / raw)
	r.rep.Summary.IngestVsRawTxn = ptr(ours / txRate)
	r.rep.Summary.IngestVsRawCopy = ptr(ours / copyRate)
	spp, sets, parts, err := r.multipartSends(ctx)
	if err != nil {
		return err
	}
	r.add(Line{Item: ItemIngest, What: "sends per part of multipart packages (sets of 2-10 RAR volumes)", Unit: "sends/part",
		Stashd: spp, Baseline: nanRatio, Ratio: nanRatio, Goal: "<= 0.3",
		Note: fmt.Sprintf("send requests the simulator accepted (a sendMessage, or a sendMessageAlbum) over the parts of the sets posted. "+
			"A set goes as one album per destination, so the floor is the sets over their parts: %d/%d = %.3f here, 1/3 for sets of three volumes",
			sets, parts, float64(sets)/float64(parts))})
	r.rep.Summary.SendsPerPartMultipart = ptr(spp)
	return nil
}

// ingestPairs is how many times the ingest item runs the pipeline and
// the raw transactions in turn.
const ingestPairs = 3

// ingestPair is one run of the pipeline and the raw transactions after it,
// on the rows it wrote.
type ingestPair struct {
	run   pipelineRun
	tx    float64 // the raw transactions' rate
	txCPU cpuUse
}

func (p ingestPair) ratio() float64 { return p.run.rate / p.tx }

// runPair runs the pipeline on n packages, then the raw transactions on
// the rows it wrote. Each side's goroutines (the daemon's, the
// simulator's, the store's) carry a profiler label, so that a
// --cpuprofile tells them apart: go tool pprof -tagfocus side=pipeline.
func (r *runner) runPair(ctx context.Context, cpu *cpuMeter, n int) (ingestPair, error) {
	var p ingestPair
	var err error
	pprof.Do(ctx, pprof.Labels("side", "pipeline"), func(ctx context.Context) {
		p.run, err = r.pipelineRate(ctx, cpu, n, false, 0)
	})
	if err != nil {
		return p, err
	}
	pprof.Do(ctx, pprof.Labels("side", "raw"), func(ctx context.Context) {
		p.tx, p.txCPU, err = r.rawPerPackage(ctx, cpu, p.run.rows, n)
	})
	return p, err
}

// pipelineRun is what pipelineRate measured.
type pipelineRun struct {
	rate   float64       // packages catalogued per second from the daemon's start
	rows   []tableRows   // the catalogue rows it wrote
	stages string        // its mean stage times
	trips  float64       // round trips per package, deliveries included
	cpu    cpuUse        // CPU per package until the last was catalogued
	first  time.Duration // from the daemon's start to the start of its first package's commit
}

// shippedSendRate is the default send budget, sends a minute per account.
const shippedSendRate float64 = 20

// pipelineRate posts n new packages (tar.gz, or zip when zips is set) in
// four channels of one account, starts the daemon (4 workers, no request
// limit, a send budget of sendRate a minute, none when 0) and measures it
// (pipelineRun). With a send budget it does not wait for the deliveries,
// and the round trips it counts are the catalogue's alone.
func (r *runner) pipelineRate(ctx context.Context, cpu *cpuMeter, n int, zips bool, sendRate float64) (pipelineRun, error) {
	var run pipelineRun
	e, err := r.newEnv(ctx, "ingest", 1, tgsim.Config{Seed: 2})
	if err != nil {
		return run, err
	}
	defer e.close(ctx)
	var srcs []tg.ChatID
	for i := range 4 {
		srcs = append(srcs, e.addSource(0, tg.KindChannel, fmt.Sprintf("source %d", i)))
	}
	for i := range n {
		if zips {
			e.postArchive(srcs[i%len(srcs)], 0, i)
		} else {
			e.postTarGz(srcs[i%len(srcs)], 0, i)
		}
	}
	start, cpu0 := time.Now(), cpu.sample()
	by0 := e.trips.snapshot()
	cfg := e.daemonConfig(4, 0)
	cfg.SendRate = sendRate
	d, err := e.start(ctx, cfg, nil)
	if err != nil {
		return run, err
	}
	got, err := e.waitCount(ctx, countPackages, n, 5*time.Minute)
	elapsed, cpu1 := time.Since(start), cpu.sample()
	if err == nil {
		// A package's created_at is the start of the transaction that
		// committed it.
		var first time.Time
		if err = e.pool.QueryRow(ctx, `SELECT min(created_at) FROM packages`).Scan(&first); err == nil {
			run.first = first.Sub(start)
		}
	}
	run.cpu = cpu.cpuPerPackage(cpu0, cpu1, n, elapsed, "bench process")
	if err == nil && got == n && sendRate == 0 {
		// Round trips count the deliveries too.
		_, err = e.waitCount(ctx, countSent, n, 2*time.Minute)
	}
	if cs := e.st.CommitStats(); cs.Commits > 0 {
		r.progress("group commit: %d commits holding %d units (%.2f a commit), %.2f ms a commit", cs.Commits, cs.Units,
			float64(cs.Units)/float64(cs.Commits), cs.Flushing.Seconds()*1000/float64(cs.Commits))
	}
	var table string
	run.trips, table = e.trips.perPackage(by0, n)
	r.progress("round trips per package by statement (%d packages):\n%s", n, table)
	d.Shutdown(context.Background())
	if err != nil {
		return run, err
	}
	if got < n {
		return run, fmt.Errorf("pipeline catalogued %d of %d packages in %s", got, n, elapsed)
	}
	if run.rows, err = readCatalogue(ctx, e.pool); err != nil {
		return run, err
	}
	run.rate, run.stages = float64(n)/elapsed.Seconds(), e.stageTimes()
	return run, nil
}

const countSent = `SELECT count(*) FROM deliveries WHERE state = 'sent'`

// tableRows are one table's columns and rows, grouped by package.
type tableRows struct {
	name  string
	cols  []string
	rows  [][]any
	byPkg map[int64][][]any
}

func readCatalogue(ctx context.Context, pool *pgxpool.Pool) ([]tableRows, error) {
	var out []tableRows
	for _, t := range catalogueTables {
		rs, err := pool.Query(ctx, "SELECT * FROM "+t.name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", t.name, err)
		}
		tr := tableRows{name: t.name, byPkg: map[int64][][]any{}}
		key := -1
		for i, f := range rs.FieldDescriptions() {
			tr.cols = append(tr.cols, f.Name)
			if f.Name == t.pkgCol {
				key = i
			}
		}
		for rs.Next() {
			v, err := rs.Values()
			if err != nil {
				rs.Close()
				return nil, err
			}
			tr.rows = append(tr.rows, v)
			if id, ok := v[key].(int64); ok {
				tr.byPkg[id] = append(tr.byPkg[id], v)
			}
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", t.name, err)
		}
		out = append(out, tr)
	}
	return out, nil
}

// rawDatabase opens a fresh migrated database for a raw baseline.
func (r *runner) rawDatabase(ctx context.Context, name string) (*store.Store, error) {
	url, err := r.freshDatabase(ctx, name)
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, store.Config{URL: url, MaxConns: 8})
}

func (r *runner) rawCopy(ctx context.Context, tables []tableRows, n int) (float64, error) {
	st, err := r.rawDatabase(ctx, "raw_copy")
	if err != nil {
		return 0, err
	}
	defer r.dropDatabase(ctx, "raw_copy")
	defer st.Close()
	start := time.Now()
	err = pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		for _, t := range tables {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(t.rows)); err != nil {
				return fmt.Errorf("copy %s: %w", t.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func (r *runner) rawPerPackage(ctx context.Context, cpu *cpuMeter, tables []tableRows, n int) (float64, cpuUse, error) {
	var used cpuUse
	st, err := r.rawDatabase(ctx, "raw_tx")
	if err != nil {
		return 0, used, err
	}
	defer r.dropDatabase(ctx, "raw_tx")
	defer st.Close()
	inserts := make([]string, len(tables))
	for i, t := range tables {
		inserts[i] = insertSQL(t.name, t.cols)
	}
	ids := make(chan int64)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		failure error
	)
	start, cpu0 := time.Now(), cpu.sample()
	for range 4 {
		wg.Go(func() {
			for id := range ids {
				err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
					b := &pgx.Batch{}
					for i, t := range tables {
						for _, row := range t.byPkg[id] {
							b.Queue(inserts[i], row...)
						}
					}
					return tx.SendBatch(ctx, b).Close()
				})
				if err != nil {
					mu.Lock()
					failure = fmt.Errorf("insert package %d: %w", id, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, row := range tables[0].rows {
		ids <- row[0].(int64)
	}
	close(ids)
	wg.Wait()
	elapsed := time.Since(start)
	used = cpu.cpuPerPackage(cpu0, cpu.sample(), n, elapsed, "client")
	if failure != nil {
		return 0, used, failure
	}
	return float64(n) / elapsed.Seconds(), used, nil
}

func insertSQL(table string, cols []string) string {
	s := "INSERT INTO " + table + " ("
	v := ""
	for i, c := range cols {
		if i > 0 {
			s += ", "
			v += ", "
		}
		s += pgx.Identifier{c}.Sanitize()
		v += fmt.Sprintf("$%d", i+1)
	}
	return s + ") VALUES (" + v + ")"
}

// rawPage is how many packages rawPages writes a transaction.
const rawPage = 16

// rawPages writes the catalogue's rows into a fresh database a page of
// page packages a transaction, each table's rows of the page with one
// COPY, over 2 connections: what the database would spend on a write path
// that catalogued a page of packages at once.
func (r *runner) rawPages(ctx context.Context, cpu *cpuMeter, tables []tableRows, n, page int) (float64, cpuUse, error) {
	var used cpuUse
	st, err := r.rawDatabase(ctx, "raw_pages")
	if err != nil {
		return 0, used, err
	}
	defer r.dropDatabase(ctx, "raw_pages")
	defer st.Close()
	pages := make(chan []int64)
	var wg sync.WaitGroup
	var failure error
	var mu sync.Mutex
	start, cpu0 := time.Now(), cpu.sample()
	for range 2 {
		wg.Go(func() {
			for ids := range pages {
				err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
					for _, t := range tables {
						var rows [][]any
						for _, id := range ids {
							rows = append(rows, t.byPkg[id]...)
						}
						if len(rows) == 0 {
							continue
						}
						if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(rows)); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					mu.Lock()
					failure = err
					mu.Unlock()
				}
			}
		})
	}
	var cur []int64
	for _, row := range tables[0].rows {
		cur = append(cur, row[0].(int64))
		if len(cur) == page {
			pages <- cur
			cur = nil
		}
	}
	if cur != nil {
		pages <- cur
	}
	close(pages)
	wg.Wait()
	elapsed := time.Since(start)
	used = cpu.cpuPerPackage(cpu0, cpu.sample(), n, elapsed, "client")
	return float64(n) / elapsed.Seconds(), used, failure
}
