package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/term"

	"stashd/harness/demo"
	"stashd/internal/config"
	"stashd/internal/httpserver"
	"stashd/internal/redact"
)

const demoHelp = `Runs the whole stashd pipeline — listener, queue, supervised ingest workers,
catch-up, rescan, dead-letter retry, delivery — against the built-in Telegram
simulator and a private PostgreSQL, publishes a reproducible stream of
archives (zip, tar, 7z, rar, multipart sets, albums, duplicates, corrupt and
incomplete sets), then audits the catalogue and the destination channels
against what was published. Exits 1 when the audit finds a missing or twice
delivered package.

Without --database-url it starts a PostgreSQL cluster from the system's
binaries under --data-dir. Either way the demo works in a fresh database
named stashd_demo, which it drops and recreates at start.`

func runDemo(args []string) int {
	fs := newFlagSet("demo", "demo [flags]", demoHelp)
	var o demo.Options
	fs.DurationVar(&o.Duration, "duration", 20*time.Second, "how long to publish")
	fs.Int64Var(&o.Seed, "seed", 1, "seed of the simulated world (same seed, same content)")
	fs.IntVar(&o.Sources, "sources", 4, "number of source channels and supergroups")
	fs.IntVar(&o.ForumTopics, "forum-topics", 0, "add a forum source with this many topics (0: no forum)")
	fs.IntVar(&o.Accounts, "accounts", 2, "number of Telegram accounts; sources are spread over them")
	fs.IntVar(&o.Destinations, "destinations", 1, "number of destination channels (@demo_dest1..N)")
	fs.BoolVar(&o.ForumDestination, "forum-destination", false, "add a destination forum (@demo_dest_forum) whose topics routes can map source topics to (e.g. deploy/demo-routes-topics.toml)")
	routesFile := fs.String("routes", "", "a file of [[routes]] tables naming @demo_source1..N, @demo_forum, @demo_dest1..N and @demo_dest_forum (e.g. deploy/demo-routes.toml); empty: every package to every destination")
	fs.Float64Var(&o.Rate, "rate", 20, "items published per second")
	fs.IntVar(&o.Workers, "workers", 4, "ingest workers per account")
	fs.IntVar(&o.QueueCapacity, "queue-capacity", 256, "capacity of each account's ingest queue")
	fs.StringVar(&o.PostDir, "post-dir", "", "also post every file of this directory (real archives to replay); with an expect.toml manifest the audit judges each file against it (docs/hostile.md)")
	fs.Float64Var(&o.Repacks, "repacks", 0, "probability that a step re-posts an earlier zip or rar package's files in the other container: a repack, to be linked, and not delivered again when the first copy's CRCs were checked against its bytes (a zip's; a rar's are its headers' claim) (0..1)")
	fs.Float64Var(&o.EditDocuments, "edit-documents", 0, "probability that a step replaces the document of an earlier single archive with a new archive (editMessageMedia): the replacement must be mirrored too (0..1)")
	fs.BoolVar(&o.DeadLetterBroken, "dead-letter-broken", false, "dead-letter archives that fail verification with the reason, as serve does unless deliver_broken (default: mirrored with their listing error)")
	fs.Float64Var(&o.DropUpdates, "drop-updates", 0, "probability that a new-message update is lost (0..1)")
	fs.Float64Var(&o.FailSends, "fail-sends", 0, "probability that a send fails (updateMessageSendFailed; half of them 429 flood waits) (0..1)")
	fs.Float64Var(&o.CloseTopics, "close-topics", 0, "probability that each topic of the destination forum is closed (reopened 1.5 s later) at each of eight moments of the run (the first topic there is, for certain); with --forum-destination (0..1)")
	fs.Float64Var(&o.DeleteTopics, "delete-topics", 0, "probability that each topic of the destination forum is deleted with its messages at each of eight moments of the run (the first topic there is, for certain); with --forum-destination (0..1)")
	fs.Float64Var(&o.ChatFlood, "chat-flood", 0, "share of destinations (rounded up) whose per-chat send limit is tight: 1.5 sends/s per account in bursts of 2; TDLib sits out a wait of a second once per send, and a send refused again fails with 429 (0..1)")
	fs.Float64Var(&o.VanishSends, "vanish-sends", 0, "probability that a pending send is deleted instead of sent (updateDeleteMessages) (0..1)")
	fs.Float64Var(&o.LoseAccess, "lose-access", 0, "probability that each source becomes inaccessible halfway (getChat answers, server calls fail) (0..1)")
	fs.Float64Var(&o.IgnorableErrors, "errors-406", 0, "probability that a history request fails with 406, to be dropped silently (0..1)")
	fs.Float64Var(&o.UnknownLastMessage, "null-last-message", 0, "probability that getChat reports a chat's last message as unknown (0..1)")
	fs.Float64Var(&o.ArchivedSources, "archived", 0, "probability that each source is in the archive chat list (0..1)")
	fs.Float64Var(&o.ProtectedSources, "protected", 0, "probability that each source has protected content (0..1)")
	fs.IntVar(&o.LogoutAccounts, "logout-accounts", 0, "log this many accounts out remotely a third of the way through and in again at two thirds (their sessions terminated, as from another device)")
	fs.DurationVar(&o.DisconnectEvery, "disconnect-every", 0, "disconnect every account this often, for a quarter of the period (0: never)")
	fs.DurationVar(&o.RestartEvery, "restart-every", 0, "restart the daemon this often, every other time abruptly (0: never)")
	fs.Float64Var(&o.StallDownloads, "stall-downloads", 0, "probability that a download stops making progress and never completes (0..1)")
	fs.Float64Var(&o.FailDownloads, "fail-downloads", 0, "probability that a download ends failed, as TDLib reports it (0..1)")
	fs.DurationVar(&o.DownloadStall, "download-stall-timeout", 2*time.Second, "cancel a download after this long without progress")
	budget := fs.String("download-budget", "512KiB", "bytes of downloads each account holds at once (e.g. 512KiB, 4GiB)")
	fs.BoolVar(&o.IdleRestart, "idle-restart", false, "after settling, restart with nothing new and report the first catch-up cycle's calls")
	fs.BoolVar(&o.RestoreBackup, "restore-backup", false, "take a pg_dump of the catalogue halfway through publishing; after settling, restore it over the catalogue, restart the daemon and audit again (report: deliveries_recovered)")
	jsonOut := fs.Bool("json", false, "print the audit as one JSON object on the last line of stdout")
	doctorOut := fs.Bool("doctor", false, "after settling, run stashd doctor's checks against the demo's world and database (report: doctor)")
	chatsOut := fs.Bool("chats", false, "after settling, run stashd chats against the demo's world (report: chats)")
	dataDir := fs.String("data-dir", envOr("STASHD_DATA_DIR", "var/demo"), "directory for the embedded database and downloads: new, empty, or one a previous demo made (it holds .stashd-scratch); its files/ is deleted (env STASHD_DATA_DIR)")
	dbURL := fs.String("database-url", os.Getenv("STASHD_DATABASE_URL"), "PostgreSQL server to use instead of the embedded one (env STASHD_DATABASE_URL)")
	metricsAddr := fs.String("metrics-addr", "127.0.0.1:0", "where to serve /metrics during the demo (loopback; port 0 picks one)")
	verbose := fs.Bool("v", false, "log at debug level")
	if rc := parse(fs, args); rc >= 0 {
		return rc
	}
	if !probabilities("demo", map[string]float64{"drop-updates": o.DropUpdates, "repacks": o.Repacks, "edit-documents": o.EditDocuments, "fail-sends": o.FailSends, "vanish-sends": o.VanishSends,
		"close-topics": o.CloseTopics, "chat-flood": o.ChatFlood, "delete-topics": o.DeleteTopics,
		"stall-downloads": o.StallDownloads, "fail-downloads": o.FailDownloads, "lose-access": o.LoseAccess,
		"errors-406": o.IgnorableErrors, "null-last-message": o.UnknownLastMessage,
		"archived": o.ArchivedSources, "protected": o.ProtectedSources}) {
		return 2
	}
	if o.LogoutAccounts < 0 || o.LogoutAccounts > o.Accounts {
		fmt.Fprintf(os.Stderr, "stashd demo: --logout-accounts: %d is outside 0..%d (the --accounts)\n", o.LogoutAccounts, o.Accounts)
		return 2
	}
	var size config.ByteSize
	if err := size.UnmarshalText([]byte(*budget)); err != nil || size <= 0 {
		fmt.Fprintf(os.Stderr, "stashd demo: --download-budget: %q is not a positive size\n", *budget)
		return 2
	}
	o.DownloadBudget = int64(size)
	if *routesFile != "" {
		specs, err := config.LoadRoutes(*routesFile)
		if err != nil {
			printErr(os.Stderr, "demo: --routes", err)
			return 2
		}
		o.Routes = specs
	}

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	live := isTerminal(os.Stderr)
	var status *liveLine
	log := newLogger(os.Stderr, level)
	if live {
		status = &liveLine{out: os.Stderr, width: func() int {
			w, _, err := term.GetSize(int(os.Stderr.Fd()))
			if err != nil {
				return 0
			}
			return w
		}}
		log = slog.New(slog.NewTextHandler(status, &slog.HandlerOptions{Level: level}))
	}
	// Without -v, warnings are counted and summarised after the audit: the
	// screen keeps one progress line, and errors still show at once.
	var warnings *warnSummary
	if !*verbose {
		warnings = newWarnSummary(log.Handler())
		log = slog.New(warnings)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := prepareScratchDir(*dataDir, *dbURL == ""); err != nil {
		fmt.Fprintf(os.Stderr, "stashd demo: --data-dir: %v\n", err)
		return 1
	}
	serverURL, _, stopDB, err := database(ctx, *dbURL, *dataDir, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd demo: %v\n", err)
		return 1
	}
	defer stopDB()
	o.DatabaseURL, err = freshDatabase(ctx, serverURL, "stashd_demo")
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd demo: %v\n", err)
		return 1
	}
	o.FilesDir = filepath.Join(*dataDir, "files")
	if err := os.RemoveAll(o.FilesDir); err != nil {
		fmt.Fprintf(os.Stderr, "stashd demo: %v\n", err)
		return 1
	}
	o.Logger = log

	handler, setGatherer := demo.MetricsHandler()
	o.Gatherer = setGatherer
	ln, err := net.Listen("tcp", *metricsAddr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd demo: metrics listener: %v\n", err)
		return 1
	}
	mux := http.NewServeMux()
	closeConsole, err := demoConsole(ctx, mux, o.DatabaseURL, handler, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd demo: console: %v\n", err)
		return 1
	}
	defer closeConsole()
	srv := httpserver.New(mux, httpserver.Limits{})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Fprintf(os.Stderr, "stashd demo: metrics on http://%s/metrics, console on http://%s/console/\n", ln.Addr(), ln.Addr())

	if live {
		o.Progress = func(p demo.Progress) { status.Set(progressLine(p)) }
	}
	var inspected demoInspection
	if *doctorOut || *chatsOut {
		o.Inspect = func(ctx context.Context, s demo.Settled) error {
			var err error
			inspected, err = inspectDemo(ctx, s, *dataDir, *doctorOut, *chatsOut)
			return err
		}
	}
	rep, err := demo.Run(ctx, o)
	if live {
		status.Clear()
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "stashd demo: interrupted")
			return 130
		}
		fmt.Fprintf(os.Stderr, "stashd demo: %v\n", err)
		return 1
	}
	printReport(rep)
	inspected.print(os.Stderr)
	if warnings != nil {
		warnings.print(os.Stderr)
	}
	if *jsonOut {
		b, err := inspected.addTo(rep)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stashd demo: %v\n", err)
			return 1
		}
		fmt.Println(string(b))
	}
	if !rep.OK() {
		fmt.Fprintln(os.Stderr, "stashd demo: AUDIT FAILED")
		return 1
	}
	fmt.Fprintln(os.Stderr, "stashd demo: audit passed")
	return 0
}

func printReport(r demo.Report) {
	w := os.Stderr
	fmt.Fprintf(w, "audit: published %d archives, %d unique packages\n", r.PublishedArchives, r.UniquePackages)
	fmt.Fprintf(w, "  catalogued %d, delivered %d, missing %d, delivered twice %d, route violations %d\n",
		r.CataloguedPackages, r.DeliveredPackages, r.Missing, r.DuplicateDeliveries, r.RouteViolations)
	fmt.Fprintf(w, "  corrupt %d (listing error recorded for %d), incomplete sets %d (dead letters %d, delivered %d)\n",
		r.Corrupt, r.CorruptListingErrors, r.IncompleteSets, r.IncompleteDeadLettered, r.IncompleteDelivered)
	fmt.Fprintf(w, "  dead letters %d, restarts %d, settled %v, %.1fs\n", r.DeadLetters, r.Restarts, r.Settled, r.ElapsedSeconds)
	if r.FailedSends+r.FloodWaitedSends+r.VanishedSends+r.ResentSends > 0 {
		fmt.Fprintf(w, "  sends failed %d, flood-waited %d, re-sent after a restart %d, vanished %d (packages delivered later %d, dead letters %d, unresolved %d)\n",
			r.FailedSends, r.FloodWaitedSends, r.ResentSends, r.VanishedSends, r.VanishedDelivered, r.VanishedDeadLettered, r.VanishedUnresolved)
	}
	if r.ClosedTopics+r.DeletedTopics+r.ChatFloodedSends+r.ChatWaitsSatOut > 0 {
		fmt.Fprintf(w, "  destination topics closed %d, deleted %d; sends refused by a chat's limit %d, its waits TDLib sat out %d\n",
			r.ClosedTopics, r.DeletedTopics, r.ChatFloodedSends, r.ChatWaitsSatOut)
	}
	fmt.Fprintf(w, "  downloads: %d stalled or failed by the world; peak on disk %d bytes (one account %d, budget %d per account)\n",
		r.StalledDownloads, r.PeakDownloadBytes, r.PeakAccountDownloadBytes, r.DownloadBudgetBytes)
	if r.DiskOverBudget {
		fmt.Fprintln(w, "  downloads exceeded the budget")
	}
	for _, n := range r.MissingNames {
		fmt.Fprintf(w, "  missing: %s\n", n)
	}
	if r.RouteViolations > 0 {
		fmt.Fprintf(w, "  route violations %d\n", r.RouteViolations)
	}
	for _, n := range r.RouteViolationNames {
		fmt.Fprintf(w, "  route violation: %s\n", n)
	}
	if r.FloodWaitBreaches > 0 {
		fmt.Fprintf(w, "  requests inside a flood wait Telegram asked for: %d\n", r.FloodWaitBreaches)
	}
	for _, n := range r.FloodWaitBreachNames {
		fmt.Fprintf(w, "  inside a flood wait: %s\n", n)
	}
	fmt.Fprintf(w, "  telegram calls: %s\n", formatCalls(r.Calls))
	if r.RestartCalls != nil {
		fmt.Fprintf(w, "  first catch-up cycle after an idle restart: %s\n", formatCalls(r.RestartCalls))
	}
}

func formatCalls(calls map[string]int) string {
	keys := make([]string, 0, len(calls))
	for k := range calls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		s += fmt.Sprintf("%s=%d ", k, calls[k])
	}
	if s == "" {
		return "none"
	}
	return s[:len(s)-1]
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// prepareDataDir creates the data directory, mode 0700. embedded says
// whether an embedded PostgreSQL may run under it: as root that cluster
// runs as the postgres user, which must pass through the data directory to
// reach its own (0700) cluster directory, and the directory then gets 0711
// (enter, not list). A command that never starts the cluster (login, or
// with database_url set) keeps 0700.
func prepareDataDir(dir string, embedded bool) error {
	perm := dataDirMode(os.Geteuid() == 0, embedded)
	if err := os.MkdirAll(dir, perm); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return os.Chmod(dir, perm)
}

// dataDirMode is the mode of the data directory: 0711 only for root with
// an embedded cluster, 0700 otherwise.
func dataDirMode(root, embedded bool) os.FileMode {
	if root && embedded {
		return 0o711
	}
	return 0o700
}

// scratchMarker marks a data directory that demo or bench created: they
// delete its files/ on every run, so they refuse a directory that holds
// anything and lacks the marker.
const scratchMarker = ".stashd-scratch"

// prepareScratchDir readies dir for demo or bench: a new or empty
// directory is created (prepareDataDir) and marked; a marked one is
// reused; any other is refused untouched, mode included. embedded says
// whether the embedded PostgreSQL may run under dir (see prepareDataDir).
func prepareScratchDir(dir string, embedded bool) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%s: %w", dir, err)
	case len(entries) > 0:
		if _, err := os.Lstat(filepath.Join(dir, scratchMarker)); err != nil {
			return fmt.Errorf("%s is not empty and stashd did not create it (no %s in it); its files/ would be deleted: give a new or empty directory", dir, scratchMarker)
		}
	}
	if err := prepareDataDir(dir, embedded); err != nil {
		return err
	}
	marker := filepath.Join(dir, scratchMarker)
	if err := os.WriteFile(marker, []byte("Created by stashd demo or bench, which delete files/ here on every run.\n"), 0o600); err != nil {
		return fmt.Errorf("mark %s: %w", dir, err)
	}
	return nil
}

// freshDatabase drops and recreates database name on the server at
// serverURL and returns its URL.
func freshDatabase(ctx context.Context, serverURL, name string) (string, error) {
	cfg, err := pgx.ParseConfig(serverURL)
	if err != nil {
		return "", fmt.Errorf("parse database url: %w", redact.Error(err, serverURL))
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("connect to database: %w", redact.Error(err, serverURL))
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop demo database: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", fmt.Errorf("create demo database: %w", err)
	}
	return withDatabase(serverURL, name)
}

// withDatabase returns the connection string connStr pointing at database
// name, in either of PostgreSQL's two connection-string forms.
func withDatabase(connStr, name string) (string, error) {
	if strings.HasPrefix(connStr, "postgres://") || strings.HasPrefix(connStr, "postgresql://") {
		u, err := url.Parse(connStr)
		if err != nil {
			// url.Error quotes the whole URL, password and all.
			return "", fmt.Errorf("parse database url: %w", redact.Error(err, connStr))
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return connStr + " dbname=" + name, nil
}
