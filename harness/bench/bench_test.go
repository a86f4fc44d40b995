package bench_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"stashd/harness/bench"
	"stashd/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The smoke run: every item in quick mode ends without error, and the
// summary line has every key with finite figures. The figures themselves
// are not asserted (timing is never an assertion).
func TestQuickRunReportsEveryGoal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole bench in quick mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress strings.Builder
	rep, err := bench.Run(ctx, bench.Options{ServerURL: pgtest.New(t), FilesDir: t.TempDir(), Quick: true, Progress: &progress})
	if err != nil {
		t.Fatalf("quick run: %v\n%s", err, progress.String())
	}
	var b strings.Builder
	rep.WriteTable(&b)
	t.Logf("\n%s", b.String())
	line, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var summary map[string]any
	if err := json.Unmarshal(line, &summary); err != nil {
		t.Fatalf("summary %s: %v", line, err)
	}
	for _, key := range []string{"economy", "ingest_vs_raw_insert", "ingest_vs_raw_txn", "ingest_vs_raw_copy",
		"sends_per_part_multipart", "hash_vs_raw_sha256", "hash_vs_limit", "drain_vs_send_budget", "latency_p99_ms",
		"catchup_vs_limit", "peak_rss_mb_1m", "daemon_rss_mb", "accounts_scale"} {
		v, ok := summary[key]
		if !ok || v == nil {
			t.Errorf("summary %s: key %q missing or null", line, key)
			continue
		}
		checkFinite(t, key, v)
	}
	for _, l := range rep.Lines {
		if math.IsNaN(l.Stashd) || math.IsInf(l.Stashd, 0) {
			t.Errorf("line %q: stashd figure %v", l.What, l.Stashd)
		}
	}
}

// checkFinite fails t unless v is a finite number or an object of them
// (JSON cannot carry NaN, so a decoded number is finite; an empty object
// measured nothing).
func checkFinite(t *testing.T, key string, v any) {
	t.Helper()
	switch v := v.(type) {
	case float64:
	case map[string]any:
		if len(v) == 0 {
			t.Errorf("%s: empty", key)
		}
		for k, x := range v {
			checkFinite(t, key+"."+k, x)
		}
	default:
		t.Errorf("%s: %v (%T) is not a figure", key, v, v)
	}
}

func TestUnknownItem(t *testing.T) {
	_, err := bench.Run(context.Background(), bench.Options{ServerURL: "postgres://x", FilesDir: t.TempDir(), Only: []string{"nope"}})
	if err == nil || !strings.Contains(err.Error(), `unknown item "nope"`) {
		t.Fatalf("err = %v", err)
	}
}
