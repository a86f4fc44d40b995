package demo_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"stashd/harness/demo"
	"stashd/internal/pgtest"
	"stashd/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func run(t *testing.T, o demo.Options) demo.Report {
	t.Helper()
	if o.DatabaseURL == "" {
		o.DatabaseURL = pgtest.New(t)
	}
	o.FilesDir = t.TempDir()
	// A test machine running every package at once may take longer than
	// the demo's own minute to settle; a stuck pipeline still fails, with
	// what it left pending (Report.Unsettled).
	o.SettleTimeout = cmp.Or(o.SettleTimeout, 3*time.Minute)
	// A small pool, as the daemon's tests have (poolConns there): each
	// connection costs the server a process and its first reads.
	o.PoolConns = cmp.Or(o.PoolConns, 4)
	rep, err := demo.Run(t.Context(), o)
	if err != nil {
		t.Fatalf("seed %d: demo: %v", o.Seed, err)
	}
	return rep
}

func check(t *testing.T, seed int64, rep demo.Report) {
	t.Helper()
	if !rep.OK() || rep.UniquePackages == 0 || !rep.Settled {
		t.Errorf("seed %d: audit failed: %+v", seed, rep)
	}
}

// The realtime pipeline end to end: everything published is catalogued and
// delivered once; corrupt archives carry their listing error; incomplete
// sets are dead letters.
func TestPipelineEndToEnd(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	rep := run(t, demo.Options{Seed: 7, Steps: 120, Rate: -1, Sources: 3, ForumTopics: 6, Accounts: 2, DatabaseURL: url})
	check(t, 7, rep)

	// What `stashd status` reads from the same database.
	st, err := store.Open(t.Context(), store.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	status, err := st.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(status.Accounts) != 2 || len(status.Sources) != 4 || status.Packages != rep.CataloguedPackages {
		t.Errorf("status: %d accounts, %d sources, %d packages; want 2, 4 and %d",
			len(status.Accounts), len(status.Sources), status.Packages, rep.CataloguedPackages)
	}
	for _, src := range status.Sources {
		if src.State != "synced" || src.Lag != 0 || src.Watermark == 0 || src.LastScanAt == nil {
			t.Errorf("settled source shown as %+v; want synced, lag 0, a watermark and a scan time", src)
		}
	}
	if rep.Corrupt == 0 || rep.IncompleteSets == 0 {
		t.Errorf("scenario lacks corrupt archives (%d) or incomplete sets (%d): the audit checked less than it should",
			rep.Corrupt, rep.IncompleteSets)
	}
	if rep.CataloguedPackages != rep.UniquePackages {
		t.Errorf("catalogued %d of %d unique packages", rep.CataloguedPackages, rep.UniquePackages)
	}
}

// Randomised no-loss test: publishes mixed with update drops up to 30 %,
// disconnects, a queue of capacity 4 and restarts (every other one a crash).
// Every seed must end with nothing missing and nothing delivered twice.
// `make test` runs seeds 1 to 4 (each drop rate, source count, account
// count and topic count at least once); STASHD_NOLOSS_SEEDS=N runs seeds 1
// to N (`make soak` runs 50: every drop rate with every source and account
// count, from 12 on).
func TestNoLossUnderFaults(t *testing.T) {
	t.Parallel()
	seeds := 4
	if v := os.Getenv("STASHD_NOLOSS_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("STASHD_NOLOSS_SEEDS=%q: want a positive number of seeds", v)
		}
		seeds = n
	}
	if testing.Short() {
		seeds = min(seeds, 4)
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			o := demo.Options{
				Seed: seed, Steps: 30 + int(seed%3)*10, Rate: 150,
				Sources: 2 + int(seed%3), Accounts: 1 + int(seed%2), ForumTopics: int(seed % 4),
				DropUpdates:     float64(seed%4) * 0.1, // 0, 10, 20, 30 %
				QueueCapacity:   4,
				DisconnectEvery: time.Duration(60+seed%5*20) * time.Millisecond,
				RestartEvery:    time.Duration(90+seed%7*15) * time.Millisecond,
			}
			rep := run(t, o)
			check(t, seed, rep)
		})
	}
}

// The JSON report carries the verdict.
func TestReportJSONHasOK(t *testing.T) {
	for _, tc := range []struct {
		rep  demo.Report
		want string
	}{
		{demo.Report{PublishedArchives: 3, UniquePackages: 2, CataloguedPackages: 2, Settled: true}, `"ok":true`},
		{demo.Report{PublishedArchives: 3, UniquePackages: 2, CataloguedPackages: 2}, `"ok":false`},
		{demo.Report{PublishedArchives: 3, UniquePackages: 2, CataloguedPackages: 1, Missing: 1}, `"ok":false`},
	} {
		b, err := json.Marshal(tc.rep)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.want) || !strings.Contains(string(b), `"published_archives":3`) {
			t.Errorf("report JSON %s: want %s and the fields", b, tc.want)
		}
	}
}

// Send faults: failures (half of them 429 flood waits that pause the
// account), sends deleted instead of sent, and restarts (every other one a
// crash). Every package must still be delivered exactly once, and each
// package of a vanished send delivered later or a dead letter.
func TestSendFaults(t *testing.T) {
	t.Parallel()
	const seed = 11
	rep := run(t, demo.Options{
		Seed: seed, Steps: 60, Rate: 150, Sources: 2, Accounts: 2,
		FailSends: 0.1, VanishSends: 0.1,
		RestartEvery: 400 * time.Millisecond,
	})
	check(t, seed, rep)
	if rep.VanishedSends == 0 || rep.FloodWaitedSends == 0 || rep.FailedSends == 0 {
		t.Errorf("scenario imposed %d vanished, %d flood-waited and %d failed sends: the audit checked less than it should",
			rep.VanishedSends, rep.FloodWaitedSends, rep.FailedSends)
	}
	if rep.VanishedDelivered+rep.VanishedDeadLettered == 0 || rep.VanishedUnresolved != 0 {
		t.Errorf("vanished sends: %d delivered later, %d dead letters, %d unresolved", rep.VanishedDelivered, rep.VanishedDeadLettered, rep.VanishedUnresolved)
	}
}

// Downloads that stall or fail (TDLib-style) are retried until every
// package is delivered, and the downloads directory never holds more than
// the per-account budget.
func TestDownloadFaultsAndDiskBudget(t *testing.T) {
	t.Parallel()
	const budget = 96 << 10
	rep := run(t, demo.Options{
		Seed: 11, Steps: 80, Rate: -1, Sources: 3, Accounts: 2,
		StallDownloads: 0.1, FailDownloads: 0.1, DownloadStall: 200 * time.Millisecond,
		DownloadBudget: budget,
	})
	check(t, 11, rep)
	if rep.StalledDownloads == 0 {
		t.Error("the world stalled or failed no download: the test checked nothing")
	}
	if rep.PeakAccountDownloadBytes == 0 || rep.DiskOverBudget {
		t.Errorf("peak bytes of one account %d, budget %d: over budget %v", rep.PeakAccountDownloadBytes, budget, rep.DiskOverBudget)
	}
	if n := rep.Calls["cancelDownloadFile"]; n == 0 {
		t.Error("no stalled download was cancelled")
	}
	if rep.Calls["deleteFile"] < rep.CataloguedPackages {
		t.Errorf("deleteFile calls %d for %d packages", rep.Calls["deleteFile"], rep.CataloguedPackages)
	}
}

// The Telegram fault knobs together: sources that lose access halfway,
// 406s on history requests, unknown last messages, archived and protected
// sources. The audit passes only when every package of an accessible source
// is delivered, and every package of a lost or protected source is
// delivered earlier or explained by the source's recorded access or its
// protected-content dead letters.
func TestAuditUnderChatFaults(t *testing.T) {
	t.Parallel()
	const seed = 11
	rep := run(t, demo.Options{
		Seed: seed, Steps: 160, Rate: -1, Sources: 6, Accounts: 2,
		LoseAccess: 0.4, IgnorableErrors: 0.05, UnknownLastMessage: 0.3,
		ArchivedSources: 0.5, ProtectedSources: 0.5,
	})
	check(t, seed, rep)
	t.Logf("audit: inaccessible %d (recorded %d), protected %d, lost undelivered %d, protected recorded %d, delivered %d of %d",
		rep.InaccessibleSources, rep.RecordedInaccessible, rep.ProtectedSources, rep.LostUndelivered,
		rep.ProtectedRecorded, rep.DeliveredPackages, rep.UniquePackages)
	if rep.InaccessibleSources == 0 || rep.ProtectedSources == 0 || rep.ProtectedRecorded == 0 {
		t.Errorf("seed %d hit no lost or no protected source: %+v", seed, rep)
	}
	if rep.DeliveredPackages == 0 {
		t.Errorf("nothing delivered: %+v", rep)
	}
}
