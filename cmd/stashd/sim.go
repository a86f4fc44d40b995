package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"stashd/harness/audit"
	"stashd/internal/httpserver"
	"stashd/internal/service"
	"stashd/sim/tdjsonsim"
	"stashd/sim/tgsim"
	"stashd/tg"
	"stashd/web"
)

const simHelp = `Serves the Telegram simulator as TDLib JSON on a Unix socket, for programs
linked against the stand-in libtdjson.so (make standin; see mk/standin.mk):
stashd built with the real TDLib adapter then runs against a simulated world
instead of Telegram, through go-tdlib and the cgo boundary. Point the stand-in
at the socket with STASHD_TDJSON_SOCKET.

The world is the demo's: seeded sources (channels, supergroups, an optional
forum), accounts acct1..acctN each watching its share of the sources, and
destination channels every account belongs to. An account is chosen by the
name of its TDLib state directory: the stand-in's client whose
database_directory is .../acct1/database is acct1. Other names are not logged
in.

--config-out FILE writes a stashd serve configuration for this world (its
accounts, sources and destinations, placeholder credentials): run
bin/stashd-standin serve --config FILE with STASHD_TDJSON_SOCKET set.

Once listening, stashd sim prints one JSON line on stdout describing the world
(socket, accounts, sources with their chat ids and accounts, destinations);
when publishing ends, a second one (items published, unique packages). It
publishes --rate items per second for --duration (or --steps items), then
keeps serving until SIGINT or SIGTERM, when it closes every client as TDLib
closes (authorizationStateClosing ... authorizationStateClosed). A second
signal exits at once.

The world lives as long as the process: a client whose connection drops (a
killed daemon) and reconnects finds the same chats, messages and files, and
the sends its previous instance on the same database directory left pending
are finished, as TDLib does after a restart (another directory's instance of
the account, another process's login, does not re-send them). A second client on the database directory of a live one
waits, then fails as TDLib does ("Can't lock file ... already in use").

--audit-addr (default 127.0.0.1:0, loopback only) serves GET /truth: the
world's ground truth as JSON (every publication with its parts and files,
every destination's documents, the faults injected, and the requests of
overlapping sessions: a request an older session of an account made after a
newer session of it had made its own, as when two processes run one
account at once), which stashd chaos audits the catalogue against; its URL
is in the first JSON line (audit_url). Each TDLib directory named after an
account is a login of that account's user, so several processes, each
with its own directory, are several sessions of one user.`

// simWorld is the first line stashd sim prints.
type simWorld struct {
	Socket       string      `json:"socket"`
	AuditURL     string      `json:"audit_url,omitempty"`
	Seed         int64       `json:"seed"`
	Accounts     []string    `json:"accounts"`
	Sources      []simSource `json:"sources"`
	Destinations []tg.ChatID `json:"destinations"`
	// LocalView: sessions answer local-capable requests from their own
	// message database (not --server-view).
	LocalView bool `json:"local_view"`
}

type simSource struct {
	Chat    tg.ChatID   `json:"chat"`
	Kind    tg.ChatKind `json:"kind"`
	Title   string      `json:"title"`
	Account string      `json:"account"`
	Topics  []int64     `json:"topics,omitempty"`
}

// simPublished is the line stashd sim prints when publishing ends.
type simPublished struct {
	Published      int `json:"published"`
	UniquePackages int `json:"unique_packages"`
}

func runSim(args []string) int {
	fs := newFlagSet("sim", "sim [flags]", simHelp)
	socket := fs.String("socket", envOr(tdjsonsim.SocketEnv, "var/sim/tdjson.sock"), "Unix socket to serve on (env "+tdjsonsim.SocketEnv+")")
	seed := fs.Int64("seed", 1, "seed of the simulated world (same seed, same content)")
	var sc tgsim.Scenario
	fs.IntVar(&sc.Sources, "sources", 4, "number of source channels and supergroups (at least 1)")
	fs.IntVar(&sc.ForumTopics, "forum-topics", 0, "add a forum source with this many topics (0: no forum)")
	fs.IntVar(&sc.Accounts, "accounts", 2, "number of Telegram accounts (acct1..acctN, at least 1); sources are spread over them")
	fs.IntVar(&sc.Destinations, "destinations", 1, "number of destination channels (at least 1)")
	rate := fs.Float64("rate", 20, "items published per second (negative: no pause)")
	duration := fs.Duration("duration", 20*time.Second, "how long to publish (0: until stopped); ignored with --steps")
	steps := fs.Int("steps", 0, "publish exactly this many items, then stop publishing")
	drop := fs.Float64("drop-updates", 0, "probability that a new-message update is lost (0..1)")
	failSends := fs.Float64("fail-sends", 0, "probability that a send fails (updateMessageSendFailed; half of them 429 flood waits) (0..1)")
	vanishSends := fs.Float64("vanish-sends", 0, "probability that a pending send is deleted instead of sent (updateDeleteMessages) (0..1)")
	stall := fs.Float64("stall-downloads", 0, "probability that a download stops making progress and never completes (0..1)")
	fail := fs.Float64("fail-downloads", 0, "probability that a download ends failed, as TDLib reports it (0..1)")
	loseAccess := fs.Float64("lose-access", 0, "probability that each source becomes inaccessible halfway (getChat answers, server calls fail) (0..1)")
	errors406 := fs.Float64("errors-406", 0, "probability that a history request fails with 406, to be dropped silently (0..1)")
	nullLast := fs.Float64("null-last-message", 0, "probability that getChat reports a chat's last message as unknown (0..1)")
	archived := fs.Float64("archived", 0, "probability that each source is in the archive chat list (0..1)")
	protected := fs.Float64("protected", 0, "probability that each source has protected content (0..1)")
	disconnectEvery := fs.Duration("disconnect-every", 0, "take every account offline this often, for a quarter of the period: updates in between are lost (0: never)")
	auditAddr := fs.String("audit-addr", "127.0.0.1:0", "loopback address answering GET /truth with the world's ground truth as JSON (empty: none)")
	configOut := fs.String("config-out", "", "write a stashd serve configuration for this world to this file (for bin/stashd-standin serve)")
	serveDir := fs.String("serve-dir", "var/sim/serve", "data directory of the --config-out configuration (each account's TDLib state directory is created in it)")
	diffDelay := fs.Duration("difference-delay", 200*time.Millisecond, "how long a session takes to fetch a chat's difference after openChat; until then it shows the chat as its database last knew it (0: at once)")
	serverView := fs.Bool("server-view", false, "answer every request from the server's truth; by default each TDLib database answers the requests TDLib answers locally from what its sessions saw")
	verbose := fs.Bool("v", false, "log at debug level")
	if rc := parse(fs, args); rc >= 0 {
		return rc
	}
	if !probabilities("sim", map[string]float64{"drop-updates": *drop, "fail-sends": *failSends, "vanish-sends": *vanishSends,
		"stall-downloads": *stall, "fail-downloads": *fail, "lose-access": *loseAccess,
		"errors-406": *errors406, "null-last-message": *nullLast, "archived": *archived, "protected": *protected}) {
		return 2
	}
	for _, n := range []struct {
		name     string
		v, least int
	}{{"sources", sc.Sources, 1}, {"accounts", sc.Accounts, 1}, {"destinations", sc.Destinations, 1}, {"forum-topics", sc.ForumTopics, 0}, {"steps", *steps, 0}} {
		if n.v < n.least {
			return badFlag("sim", "--%s: %d is below %d", n.name, n.v, n.least)
		}
	}
	if *diffDelay < 0 || *diffDelay > time.Minute {
		return badFlag("sim", "--difference-delay: %s is outside 0..1m", *diffDelay)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := newLogger(os.Stderr, level)

	// Created when missing, never chmod-ed: the socket may well live in a
	// shared directory such as /tmp.
	if err := os.MkdirAll(filepath.Dir(*socket), 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "stashd sim: create %s: %v\n", filepath.Dir(*socket), err)
		return 1
	}
	sc.Seed = *seed
	world := tgsim.NewWorld(tgsim.Config{
		// Each instance's downloads go to the files_directory it gives
		// setTdlibParameters, as TDLib's do: no FilesDir.
		Seed: *seed, DropRate: *drop,
		SendFailRate: *failSends / 2, SendFloodRate: *failSends / 2, SendFloodWait: time.Second,
		SendVanishRate:     *vanishSends,
		ResendAfterRestart: true, SearchIndexLag: time.Minute,
		StallDownloadRate: *stall, FailDownloadRate: *fail,
		IgnorableErrorRate: *errors406, UnknownLastMessageRate: *nullLast,
		ServerView: *serverView, DifferenceDelay: *diffDelay,
	})
	gen := tgsim.NewGenerator(world, sc)
	faults := newSimFaults(world, gen, *seed)
	faults.start(*archived, *protected)

	if *configOut != "" {
		if err := writeServeConfig(*configOut, *serveDir, describeWorld(*socket, *seed, gen)); err != nil {
			fmt.Fprintf(os.Stderr, "stashd sim: --config-out: %v\n", err)
			return 1
		}
	}
	desc := describeWorld(*socket, *seed, gen)
	desc.LocalView = world.LocalView()
	if *auditAddr != "" {
		aln, err := listenLoopback(*auditAddr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stashd sim: %v\n", err)
			return 2
		}
		asrv := serveAudit(aln, faults, log)
		defer asrv.Close()
		desc.AuditURL = "http://" + aln.Addr().String() + "/truth"
	}
	ln, err := tdjsonsim.Listen(*socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd sim: %v\n", err)
		return 1
	}
	srv := tdjsonsim.New(world, tdjsonsim.Config{Logger: log})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	printJSON(desc)
	log.Info("serving the simulator as TDLib JSON", "socket", *socket, "audit", desc.AuditURL)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	published := publish(ctx, gen, *rate, *duration, *steps, func() { faults.loseAccess(*loseAccess) }, func(ctx context.Context) {
		if *disconnectEvery > 0 {
			service.Ticks(ctx, *disconnectEvery, nil, func(context.Context) {
				for _, a := range gen.Accounts() {
					world.Disconnect(a, *disconnectEvery/4)
				}
			})
		}
	})
	// A disconnect window may still be open: end it, as the network would.
	for _, a := range gen.Accounts() {
		world.Reconnect(a)
	}
	if ctx.Err() == nil {
		printJSON(simPublished{Published: published, UniquePackages: len(gen.Truth().Unique())})
		log.Info("publishing done; serving until stopped", "published", published)
	}

	rc := 0
	select {
	case <-ctx.Done():
	case err := <-served:
		log.Error("serve", "err", err)
		rc = 1
	}
	stop() // a second signal now ends the process (Go's default action)
	log.Info("closing every client")
	if err := srv.Close(); err != nil {
		log.Error("close", "err", err)
		rc = 1
	}
	return rc
}

func describeWorld(socket string, seed int64, gen *tgsim.Generator) simWorld {
	w := simWorld{Socket: socket, Seed: seed, Accounts: gen.Accounts(), Destinations: gen.Destinations()}
	for _, s := range gen.Sources() {
		w.Sources = append(w.Sources, simSource{Chat: s.Chat, Kind: s.Kind, Title: s.Title, Account: s.Account, Topics: s.Topics})
	}
	return w
}

// writeServeConfig writes serveConfig(w, dataDir) to path and creates
// each account's TDLib state directory under dataDir: the simulator logs
// every account in by that directory's name, and serve wants an account's
// session to exist before it starts.
func writeServeConfig(path, dataDir string, w simWorld) error {
	for _, a := range w.Accounts {
		if err := os.MkdirAll(filepath.Join(dataDir, "accounts", a, "database"), 0o700); err != nil {
			return fmt.Errorf("create account directory: %w", err)
		}
	}
	if err := os.WriteFile(path, []byte(serveConfig(w, dataDir)), 0o600); err != nil {
		return fmt.Errorf("write configuration: %w", err)
	}
	return nil
}

// serveConfig is a stashd serve configuration for the simulated world w:
// its accounts with their sources, its destinations, placeholder
// credentials (the simulator takes any) and a data directory of its own.
func serveConfig(w simWorld, dataDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# stashd serve configuration for the world of stashd sim --seed %d.\n", w.Seed)
	fmt.Fprintf(&b, "# Run: LD_LIBRARY_PATH=.cache/standin STASHD_TDJSON_SOCKET=%s bin/stashd-standin serve --config THIS_FILE\n", w.Socket)
	b.WriteString("# The credentials are placeholders: the simulator accepts any.\n")
	b.WriteString("api_id = 1\napi_hash = \"00000000000000000000000000000000\"\n")
	fmt.Fprintf(&b, "data_dir = %q\nmetrics_addr = \"127.0.0.1:9464\"\n", dataDir)
	dests := make([]string, len(w.Destinations))
	for i, d := range w.Destinations {
		dests[i] = fmt.Sprintf("%q", strconv.FormatInt(int64(d), 10))
	}
	fmt.Fprintf(&b, "destinations = [%s]\n", strings.Join(dests, ", "))
	for _, a := range w.Accounts {
		var srcs []string
		for _, s := range w.Sources {
			if s.Account == a {
				srcs = append(srcs, fmt.Sprintf("%q", strconv.FormatInt(int64(s.Chat), 10)))
			}
		}
		fmt.Fprintf(&b, "\n[[accounts]]\nname = %q\nsources = [%s]\n", a, strings.Join(srcs, ", "))
	}
	return b.String()
}

// printJSON prints v as one line on stdout, where scripts read it.
func printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the types above always encode
	}
	fmt.Println(string(b))
}

// publish steps the generator rate times a second (no pause when rate is
// negative) for duration, or steps times when steps is positive; a zero
// duration publishes until ctx ends. It returns the items published.
// halfway is called once, when half the steps (or half the duration) have
// been published. during runs alongside, until publishing ends.
func publish(ctx context.Context, gen *tgsim.Generator, rate float64, duration time.Duration, steps int, halfway func(), during func(context.Context)) int {
	dctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { during(dctx) })
	defer wg.Wait()
	defer stop()
	var every time.Duration
	if rate > 0 {
		every = time.Duration(float64(time.Second) / rate)
	}
	start := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	half := false
	for n := 0; ; n++ {
		if !half && (steps > 0 && n >= steps/2 || steps <= 0 && duration > 0 && time.Since(start) >= duration/2) {
			halfway()
			half = true
		}
		switch {
		case steps > 0 && n >= steps,
			steps <= 0 && duration > 0 && time.Since(start) >= duration:
			return n
		}
		if every > 0 {
			t.Reset(time.Until(start.Add(time.Duration(n) * every)))
			select {
			case <-ctx.Done():
				return n
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return n
		}
		gen.Step()
	}
}

// simFaults applies the chat fault knobs to the served world's sources,
// drawn from the seed so that a run can be repeated.
type simFaults struct {
	world *tgsim.World
	gen   *tgsim.Generator
	rng   *rand.Rand

	mu        sync.Mutex
	lost      []tg.ChatID
	protected []tg.ChatID
}

func newSimFaults(world *tgsim.World, gen *tgsim.Generator, seed int64) *simFaults {
	return &simFaults{world: world, gen: gen, rng: rand.New(rand.NewPCG(uint64(seed), 0x6661756c74))} // "fault"
}

func (f *simFaults) chance(p float64) bool { return p > 0 && f.rng.Float64() < p }

// start archives and protects sources, each with its probability.
func (f *simFaults) start(archived, protected float64) {
	for _, s := range f.gen.Sources() {
		if f.chance(archived) {
			f.world.SetArchived(s.Chat, true)
		}
		if f.chance(protected) {
			f.world.SetProtected(s.Chat, true)
			f.mu.Lock()
			f.protected = append(f.protected, s.Chat)
			f.mu.Unlock()
		}
	}
}

// loseAccess takes each source away with probability p.
func (f *simFaults) loseAccess(p float64) {
	for _, s := range f.gen.Sources() {
		if f.chance(p) {
			f.world.LoseAccess(s.Chat, true)
			f.mu.Lock()
			f.lost = append(f.lost, s.Chat)
			f.mu.Unlock()
		}
	}
}

// truth is the world's ground truth for an audit.
func (f *simFaults) truth() audit.Truth {
	f.mu.Lock()
	lost, protected := slices.Clone(f.lost), slices.Clone(f.protected)
	f.mu.Unlock()
	return audit.FromWorld(f.world, f.gen, lost, protected, nil)
}

// serveAudit answers GET /truth on ln with the world's ground truth as
// JSON (audit.Truth), for `stashd chaos` and scripts.
func serveAudit(ln net.Listener, f *simFaults, log *slog.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /truth", func(w http.ResponseWriter, r *http.Request) {
		// A page whose name rebinds to 127.0.0.1 reaches the listener
		// but names its own host.
		if !web.LoopbackHost(r.Host) {
			http.Error(w, "the audit endpoint answers requests for 127.0.0.1, [::1] or localhost only", http.StatusMisdirectedRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(f.truth()); err != nil {
			log.Debug("audit: write truth", "err", err)
		}
	})
	srv := httpserver.New(mux, httpserver.Limits{})
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("audit endpoint", "err", err)
		}
	}()
	return srv
}

// listenLoopback listens on addr, which must be a loopback address: the
// ground truth is for the machine's own harness.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--audit-addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--audit-addr %q: not a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--audit-addr: %w", err)
	}
	return ln, nil
}
