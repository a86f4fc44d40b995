package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// env is one measured world: the simulator, a fresh catalogue database and
// the daemon's accounts, each watching its own sources.
type env struct {
	r        *runner
	name     string
	url      string // of its database
	world    *tgsim.World
	st       *store.Store
	pool     *pgxpool.Pool
	accounts []daemon.Account
	dests    []tg.ChatID
	files    string
	// reg is the registry of the daemon started last.
	reg *prometheus.Registry
	// trips counts what the store's connections send.
	trips *roundTrips
	// tgz builds the tar.gz packages postTarGz posts.
	tgz smallTarGz
}

// stageTimes returns the mean time per ingest stage of the daemon started
// last, in milliseconds, formatted for a note: where a package's time goes.
func (e *env) stageTimes() string {
	if e.reg == nil {
		return ""
	}
	mfs, err := e.reg.Gather()
	if err != nil {
		return ""
	}
	out := ""
	for _, mf := range mfs {
		if mf.GetName() != "stashd_ingest_stage_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if h.GetSampleCount() == 0 {
				continue
			}
			stage := ""
			for _, l := range m.GetLabel() {
				stage = l.GetValue()
			}
			out += fmt.Sprintf("%s %.1f ms, ", stage, h.GetSampleSum()/float64(h.GetSampleCount())*1000)
		}
	}
	return strings.TrimSuffix(out, ", ")
}

// newEnv makes a world with the given accounts (acct1..acctN), one
// destination every account may post to, and a fresh database.
func (r *runner) newEnv(ctx context.Context, name string, accounts int, cfg tgsim.Config) (*env, error) {
	url, err := r.freshDatabase(ctx, name)
	if err != nil {
		return nil, err
	}
	trips := &roundTrips{}
	st, err := store.Open(ctx, store.Config{URL: url, MaxConns: int32(accounts*16 + 16), Tracer: trips.tracer()})
	if err != nil {
		return nil, err
	}
	files := filepath.Join(cmp.Or(r.o.DownloadsDir, r.o.FilesDir), name)
	if err := os.RemoveAll(files); err != nil {
		st.Close()
		return nil, err
	}
	cfg.FilesDir = files
	e := &env{r: r, name: name, url: url, trips: trips, world: tgsim.NewWorld(cfg), st: st, pool: st.Pool(), files: files}
	var names []string
	for i := range accounts {
		n := fmt.Sprintf("acct%d", i+1)
		e.world.AddAccount(n, false)
		e.accounts = append(e.accounts, daemon.Account{Name: n})
		names = append(names, n)
	}
	e.dests = []tg.ChatID{e.world.AddChat(tg.KindChannel, "mirror", names...)}
	return e, nil
}

func (e *env) close(ctx context.Context) {
	e.st.Close()
	os.RemoveAll(e.files)
	e.r.dropDatabase(ctx, e.name)
}

// addSource adds a channel (or forum) watched by account i.
func (e *env) addSource(i int, kind tg.ChatKind, title string) tg.ChatID {
	id := e.world.AddChat(kind, title, e.accounts[i].Name)
	e.accounts[i].Sources = append(e.accounts[i].Sources, id)
	return id
}

// archiveBytes returns a small zip unique to n: every package has its own
// content hash, so none is a duplicate.
func archiveBytes(n int) []byte {
	return archivetest.Zip([]archivetest.File{{Name: fmt.Sprintf("dir/file-%d.txt", n), Data: fmt.Appendf(nil, "payload %d", n)}})
}

// postTarGz posts package n as a tar.gz (smallTarGz), which the pipeline
// takes at once.
func (e *env) postTarGz(chat tg.ChatID, thread int64, n int) tg.Message {
	return e.world.Post(chat, thread, tgsim.Post{FileName: tarGzName(n), Data: e.tgz.make(n)})
}

// postArchive posts archive n as a document.
func (e *env) postArchive(chat tg.ChatID, thread int64, n int) tg.Message {
	return e.world.Post(chat, thread, tgsim.Post{FileName: fmt.Sprintf("pkg-%d.zip", n), Data: archiveBytes(n)})
}

// daemonConfig is the daemon as serve builds it, with workers per account
// and a request rate per account (<= 0: effectively unlimited).
func (e *env) daemonConfig(workers int, rate float64) daemon.Config {
	if rate <= 0 {
		rate = 1e6
	}
	cfg := daemon.Config{
		Accounts: e.accounts, Destinations: e.dests, Workers: workers, QueueCapacity: 1024, Rate: rate,
		Ingest:       ingest.Config{SetSettle: 300 * time.Millisecond, SetMaxWait: 2 * time.Second},
		DrainTimeout: 5 * time.Second, Logger: e.r.log,
		// The simulator here fetches a chat's difference within the
		// openChat request (no DifferenceDelay), as it answers every
		// request at once: the wait for it is as short, as the request
		// rate's limit is lifted.
		ViewSettle: time.Millisecond,
	}
	cfg.Catchup.Interval = 250 * time.Millisecond
	return cfg
}

// start builds and starts a daemon on fresh simulated clients. beforeRun,
// when set, runs between Prepare and Run.
func (e *env) start(ctx context.Context, cfg daemon.Config, beforeRun func(*daemon.Daemon)) (*daemon.Daemon, error) {
	reg := prometheus.NewRegistry() // a new process's metrics
	cfg.Registry, e.reg = reg, reg
	d := daemon.New(cfg, e.st, func(ctx context.Context, account string) (tg.Client, error) {
		return e.world.Client(account), nil
	})
	if err := d.Prepare(ctx); err != nil {
		return nil, fmt.Errorf("prepare daemon: %w", err)
	}
	if beforeRun != nil {
		beforeRun(d)
	}
	if err := d.Run(); err != nil {
		return nil, fmt.Errorf("run daemon: %w", err)
	}
	return d, nil
}

// count returns the number of rows of query (a SELECT count(*)).
func (e *env) count(ctx context.Context, query string) (int, error) {
	var n int
	err := e.pool.QueryRow(ctx, query).Scan(&n)
	return n, err
}

// waitCount polls query until it reaches want or timeout passes, and
// returns the last count. The bench polls the catalogue as a user would.
// A poll is a scan the server runs beside the work being timed, so polls
// are spaced by pollGap: few while much is left, close together near the
// end, where their spacing bounds the precision of the timing they end.
func (e *env) waitCount(ctx context.Context, query string, want int, timeout time.Duration) (int, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		n, err := e.count(ctx, query)
		if err != nil || n >= want || time.Now().After(deadline) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(pollGap(n, want, time.Since(start))):
		}
	}
}

// pollGap is the wait before the next poll of a count at n of want after
// elapsed: a quarter of the time the rest takes at the pace so far,
// within [2 ms, 250 ms]; 20 ms while nothing has been counted.
func pollGap(n, want int, elapsed time.Duration) time.Duration {
	if n <= 0 {
		return 20 * time.Millisecond
	}
	left := time.Duration(float64(elapsed) * float64(want-n) / float64(n))
	return min(max(left/4, 2*time.Millisecond), 250*time.Millisecond)
}

const countPackages = `SELECT count(*) FROM packages`
