package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Items, in the order they run; Options.Only names them.
const (
	ItemHash     = "hash"
	ItemIngest   = "ingest"
	ItemEconomy  = "economy"
	ItemDrain    = "drain"
	ItemCatchup  = "catchup"
	ItemScale    = "scale"
	ItemLatency  = "latency"
	ItemMemory   = "memory"
	itemsInOrder = "hash,ingest,economy,drain,catchup,scale,latency,memory"
)

// Items lists every item in the order it runs.
func Items() []string { return strings.Split(itemsInOrder, ",") }

// Options configure a run. ServerURL and FilesDir are required.
type Options struct {
	// ServerURL is a PostgreSQL connection string whose role may create
	// databases: each item works in its own fresh stashd_bench_* database.
	ServerURL string
	// FilesDir is scratch space for test archives and simulated downloads.
	FilesDir string
	// DownloadsDir, when set, is scratch space for the simulated
	// Telegram's downloads (TDLib's file cache) in place of FilesDir: the
	// run makes a directory of its own in it per item and removes it.
	DownloadsDir string
	// Quick runs every item at a size that takes seconds (a smoke run; its
	// figures mean little).
	Quick bool
	// Only restricts the run to these items; empty runs all.
	Only []string
	// Daemon is a stashd executable linked against the stand-in libtdjson
	// (make build-standin): the memory item runs it as a process of its
	// own, on a world served over a socket, and reads its peak RSS. Empty
	// measures the daemon inside this process, which is only good for a
	// smoke run. LibDir, when set, goes on its LD_LIBRARY_PATH.
	Daemon string
	LibDir string
	// Logger; nil discards.
	Logger *slog.Logger
	// Progress receives one line per step; nil discards.
	Progress io.Writer
}

// Line is one row of the table: what was measured, stashd's figure, the
// baseline's figure from the same run, their ratio and the goal.
type Line struct {
	Item     string  `json:"item"`
	What     string  `json:"what"`
	Stashd   float64 `json:"stashd"`
	Baseline float64 `json:"baseline"`
	Unit     string  `json:"unit"`
	// Ratio compares stashd with the baseline in the sense of the goal
	// (higher is better unless the goal says otherwise); NaN when the line
	// has none.
	Ratio float64 `json:"-"`
	Goal  string  `json:"goal"`
	// Met is nil for lines without a goal.
	Met  *bool  `json:"met,omitempty"`
	Note string `json:"note,omitempty"`
}

// Summary is the last line of `stashd bench --json`: one figure (or small
// object) per goal, null for items not run.
type Summary struct {
	// Economy is Telegram calls per cycle, by cycle kind (idle, restart,
	// one_new) and strategy (poll, skip_rules, stashd).
	Economy map[string]map[string]float64 `json:"economy"`
	// IngestVsRawInsert is packages/s of the whole pipeline over packages/s
	// of plain inserts of the same rows (goal ≥ 0.5).
	IngestVsRawInsert *float64 `json:"ingest_vs_raw_insert"`
	// IngestVsRawTxn is packages/s of the pipeline over one batched INSERT
	// transaction per package of the same rows (goal ≥ 1.0), and
	// IngestVsRawCopy over COPY of them in one transaction (goal 0.25).
	IngestVsRawTxn  *float64 `json:"ingest_vs_raw_txn"`
	IngestVsRawCopy *float64 `json:"ingest_vs_raw_copy"`
	// PGRoundTripsPerPackage is the statements, batches and COPYs the
	// daemon sent to PostgreSQL per package catalogued and delivered
	// (goal ≤ 2).
	PGRoundTripsPerPackage *float64 `json:"pg_round_trips_per_package"`
	// SendsPerPartMultipart is the sends made for multipart packages over
	// their parts (goal ≤ 0.3).
	SendsPerPartMultipart *float64 `json:"sends_per_part_multipart"`
	// HashVsRawSHA256 is the throughput of hashing and listing over that of
	// crypto/sha256 alone on the same bytes, worst format (goal ≥ 0.8).
	HashVsRawSHA256 *float64 `json:"hash_vs_raw_sha256"`
	// HashVsLimit is, by format, the throughput of hashing and listing
	// over that of the slower of crypto/sha256 alone and decompression
	// alone on the same bytes (goal ≥ 0.8 each).
	HashVsLimit map[string]float64 `json:"hash_vs_limit"`
	// DrainVsSendBudget is the send budget's own time for a backlog over
	// the time the daemon took to send it, worst case (goal ≥ 0.95).
	DrainVsSendBudget *float64 `json:"drain_vs_send_budget"`
	// LatencyP99Ms is event → catalogued p99 at the offered load (goal ≤ 50).
	LatencyP99Ms *float64 `json:"latency_p99_ms"`
	// CatchupVsLimit is achieved requests/s over the per-account limit
	// while catching up (goal ≥ 0.9).
	CatchupVsLimit *float64 `json:"catchup_vs_limit"`
	// PeakRSSMB1M is the daemon's peak RSS in MB while catching up the
	// largest backlog (goal ≤ 150).
	PeakRSSMB1M *float64 `json:"peak_rss_mb_1m"`
	// DaemonRSSMB is the daemon's peak RSS (VmHWM of its own process) in
	// MB by backlog: 10k, 100k and 1m waiting messages (goal: 1m ≤ 80 and
	// ≤ 2 × 10k).
	DaemonRSSMB map[string]float64 `json:"daemon_rss_mb"`
	// AccountsScale is throughput with N accounts over throughput with
	// one, by N (goal ≥ 0.9 × N).
	AccountsScale map[string]float64 `json:"accounts_scale"`
}

// Report is a run's table and summary.
type Report struct {
	Lines   []Line  `json:"lines"`
	Summary Summary `json:"summary"`
	// Seconds is how long the run took.
	Seconds float64 `json:"seconds"`
}

type runner struct {
	o   Options
	log *slog.Logger
	rep *Report
}

// Run measures the items of o and returns the table. An item that fails
// ends the run with its error; what was measured so far is returned.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.ServerURL == "" || o.FilesDir == "" {
		return Report{}, errors.New("bench: ServerURL and FilesDir are required")
	}
	for _, it := range o.Only {
		if !slices.Contains(Items(), it) {
			return Report{}, fmt.Errorf("bench: unknown item %q (items: %s)", it, itemsInOrder)
		}
	}
	r := &runner{o: o, log: cmp.Or(o.Logger, slog.New(slog.DiscardHandler)), rep: &Report{}}
	start := time.Now()
	steps := []struct {
		item string
		run  func(context.Context) error
	}{
		{ItemHash, r.hash}, {ItemIngest, r.ingest}, {ItemEconomy, r.economy}, {ItemDrain, r.drain},
		{ItemCatchup, r.catchup}, {ItemScale, r.scale}, {ItemLatency, r.latency},
		{ItemMemory, r.memory},
	}
	for _, s := range steps {
		if len(o.Only) > 0 && !slices.Contains(o.Only, s.item) {
			continue
		}
		t := time.Now()
		r.progress("%s: running", s.item)
		if err := s.run(ctx); err != nil {
			r.rep.Seconds = time.Since(start).Seconds()
			return *r.rep, fmt.Errorf("bench %s: %w", s.item, err)
		}
		r.progress("%s: done in %.1fs", s.item, time.Since(t).Seconds())
	}
	r.rep.Seconds = time.Since(start).Seconds()
	return *r.rep, nil
}

func (r *runner) progress(format string, args ...any) {
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, "bench: "+format+"\n", args...)
	}
}

// add appends a line. Its Met is judged from ratio against goal: ">= x"
// or "<= x" (applied to the ratio when the line has one, else to Stashd).
func (r *runner) add(l Line) {
	if l.Goal != "" {
		v := l.Stashd
		if !math.IsNaN(l.Ratio) {
			v = l.Ratio
		}
		var op string
		var x float64
		if _, err := fmt.Sscanf(l.Goal, "%s %g", &op, &x); err == nil {
			met := op == ">=" && v >= x || op == "<=" && v <= x
			l.Met = &met
		}
	}
	r.rep.Lines = append(r.rep.Lines, l)
}

func ptr(v float64) *float64 { return &v }

// ratio returns a/b, NaN when b is zero.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// WriteTable prints the report as an aligned table.
func (rep Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "what\tstashd\tbaseline\tratio\tgoal\tmet")
	for _, l := range rep.Lines {
		ratio := "-"
		if !math.IsNaN(l.Ratio) {
			ratio = fmt.Sprintf("%.2f", l.Ratio)
		}
		met := "-"
		if l.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*l.Met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.What, figure(l.Stashd, l.Unit), figure(l.Baseline, l.Unit), ratio, cmp.Or(l.Goal, "-"), met)
	}
	tw.Flush()
	for _, l := range rep.Lines {
		if l.Note != "" {
			fmt.Fprintf(w, "  %s: %s\n", l.What, l.Note)
		}
	}
}

func figure(v float64, unit string) string {
	if math.IsNaN(v) {
		return "-"
	}
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e9:
		return fmt.Sprintf("%.0f %s", v, unit)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}

// JSON returns the summary as one line of JSON.
func (rep Report) JSON() ([]byte, error) { return json.Marshal(rep.Summary) }

// nanRatio marks a figure a line does not have.
var nanRatio = math.NaN()

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
