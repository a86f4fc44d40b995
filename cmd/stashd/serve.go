package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"stashd/daemon"
	"stashd/ingest"
	"stashd/internal/caption"
	"stashd/internal/config"
	"stashd/internal/httpserver"
	"stashd/internal/infometrics"
	"stashd/internal/redact"
	"stashd/internal/service"
	"stashd/rescan"
	"stashd/store"
	"stashd/tg"
	"stashd/tg/tdlib"
)

const serveHelp = `Runs the daemon: every configured account's TDLib client, listener,
ingest workers, catch-up, rescan and dead-letter retry, until SIGINT or
SIGTERM, then drains gracefully (a second signal aborts the drain).

Settings come from --config (TOML, see deploy/stashd.example.toml), then
STASHD_* environment variables, then the flags below; each setting is
documented in docs/configuration.md with its default. A bad setting is reported in one
line naming it, with exit status 2, and nothing is started.

Under systemd (Type=notify) it reports READY=1 once the database is up and
every account whose lease it took is running (accounts another instance
holds are stood by for: see lease_ttl; an account a recorded flood wait
holds entirely, or whose TDLib would re-send a pending send inside one,
starts once the wait is over), feeds the watchdog while it
is healthy and reports STOPPING=1 when asked to stop.

metrics_addr (default 127.0.0.1:9464, loopback only) serves /metrics,
/healthz, /readyz and the web console under /console/. Bound beyond
loopback, clients not on loopback get /metrics, /healthz and /readyz only
with "Authorization: Bearer" and console_token (none without a token), and
the console only with console_remote over HTTPS (console_tls_cert and
console_tls_key, or console_behind_proxy). Without a token the console
answers requests for 127.0.0.1, [::1] or localhost only.

--simulate runs the same daemon against the built-in Telegram simulator
instead of TDLib, publishing a stream of archives: no credentials needed.
Its data directory defaults to ./var/simulate (not /var/lib/stashd), so
simulated packages never land in a real daemon's catalogue.`

// The bounds of --simulate-rate: the publishing interval (a second over
// the rate) stays between a millisecond and about 17 minutes. NaN and
// ±Inf fall outside.
const (
	minSimRate = 0.001
	maxSimRate = 1000
)

func runServe(args []string) int {
	fs := newFlagSet("serve", "serve [--config FILE] [flags]", serveHelp)
	configPath := fs.String("config", os.Getenv("STASHD_CONFIG"), "TOML configuration file (env STASHD_CONFIG)")
	simulate := fs.Bool("simulate", false, "use the built-in Telegram simulator instead of TDLib")
	simSeed := fs.Int64("simulate-seed", 1, "with --simulate: seed of the simulated world")
	simRate := fs.Float64("simulate-rate", 5, "with --simulate: items published per second, 0.001..1000 (0: none)")
	config.RegisterFlags(fs)
	if rc := parse(fs, args); rc >= 0 {
		return rc
	}
	if r := *simRate; r != 0 && !(r >= minSimRate && r <= maxSimRate) {
		return badFlag("serve", "--simulate-rate: %v is outside %v..%v items per second (0: none)", r, minSimRate, maxSimRate)
	}
	mode := config.Daemon
	if *simulate {
		mode = config.Simulate
	}
	cfg, err := config.LoadMode(*configPath, os.Getenv, fs, mode)
	if err != nil {
		printErr(os.Stderr, "serve", err)
		return 2
	}
	if !*simulate {
		// Checked before anything is created or started.
		// No account ever logged in on this host is a setup left
		// unfinished. An account whose session is not logged in (a login
		// that never finished, a session terminated elsewhere) is the
		// daemon's to report: it runs the others and starts that one once
		// stashd login has logged it in.
		if err := loggedIn(cfg); err != nil {
			fmt.Fprintf(os.Stderr, "stashd serve: %v\n", err)
			return 1
		}
	}
	// The listener is bound before anything starts: an address in use or
	// not this machine's is a bad setting, exit 2, as the others are.
	var metricsLn net.Listener
	if cfg.MetricsAddr != "off" {
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stashd serve: metrics_addr: %s\n", oneLine(err))
			return 2
		}
		metricsLn = ln
		defer func() {
			if metricsLn != nil {
				metricsLn.Close() // never served: a start that failed
			}
		}()
	}
	log := configuredLogger(cfg)
	slog.SetDefault(log)
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}

	// First signal: stop taking work and drain. Second: abort the drain.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	if err := prepareDataDir(cfg.DataDir, cfg.DatabaseURL == ""); err != nil {
		log.Error("data directory", "err", err)
		return 1
	}
	s := &server{cfg: cfg, log: log, ln: metricsLn}
	if err := s.openStore(ctx); err != nil {
		log.Error("cannot start", "err", redact.Message(dbError(err), cfg.DatabaseURL))
		return 1
	}
	defer s.close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	infometrics.Register(reg, s.st, cfg.LeaseTTL.Duration)
	dcfg, dial, err := s.daemonConfig(ctx, *simulate, *simSeed, *simRate, reg)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	d := daemon.New(dcfg, s.st, dial)
	metricsLn = nil // serveHTTP owns it now
	if err := s.serveHTTP(d, reg); err != nil {
		log.Error("metrics listener", "err", err)
		return 1
	}
	if err := d.Start(ctx); err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	if s.publish != nil {
		go s.publish(ctx)
	}
	notify(log, sddaemon.SdNotifyReady)
	log.Info("stashd started", "accounts", len(dcfg.Accounts), "metrics", s.metricsAddr)
	go watchdog(ctx, log, d)

	code := 0
	select {
	case sig := <-sigs:
		log.Info("stopping", "signal", sig.String())
	case err := <-d.Fatal():
		log.Error("stopping: the daemon cannot go on", "err", err)
		code = 1
	case <-s.dbDone:
		log.Error("stopping: the embedded PostgreSQL exited")
		code = 1
	}
	notify(log, sddaemon.SdNotifyStopping)
	drainCtx, abort := context.WithCancel(context.Background())
	go func() {
		select {
		case <-sigs:
			log.Warn("second signal: aborting the drain")
			abort()
		case <-drainCtx.Done():
		}
	}()
	d.Shutdown(drainCtx)
	abort()
	cancel()
	log.Info("stopped")
	return code
}

// loggedIn checks that some account has a TDLib session (stashd login
// creates it), so that a setup where none was ever logged in is reported
// before the database starts. Accounts without one are left to the
// daemon, which reports each and does not run it.
func loggedIn(cfg config.Config) error {
	var missing []string
	for _, a := range cfg.Accounts {
		dir := tdlib.Config{StateDir: filepath.Join(cfg.DataDir, "accounts", a.Name)}.DatabaseDir()
		if _, err := os.Stat(dir); err != nil {
			missing = append(missing, fmt.Sprintf("account %q is not logged in (no session in %s): run stashd login --account %s first, as the user the daemon runs as", a.Name, dir, a.Name))
		}
	}
	if len(missing) > 0 && len(missing) == len(cfg.Accounts) {
		return errors.New(missing[0])
	}
	return nil
}

// server holds what serve opens, for closing in order.
type server struct {
	cfg         config.Config
	log         *slog.Logger
	st          *store.Store
	stopDB      func()
	dbDone      <-chan struct{}
	http        *http.Server
	metricsAddr string
	// ln is metrics_addr's listener, bound before the database starts
	// (nil: serveHTTP binds it).
	ln      net.Listener
	publish func(ctx context.Context)
	// closeConsole releases the console's own pool.
	closeConsole func()
}

func (s *server) openStore(ctx context.Context) error {
	url, done, stop, err := database(ctx, s.cfg.DatabaseURL, s.cfg.DataDir, s.log)
	if err != nil {
		return err
	}
	s.stopDB, s.dbDone = stop, done
	st, err := store.Open(ctx, store.Config{URL: url, MaxConns: daemon.PoolConns(len(s.cfg.Accounts), s.cfg.Workers),
		LockTTL: s.cfg.LockTTL.Duration})
	if err != nil {
		s.stopDB()
		return err
	}
	s.st = st
	return nil
}

// close releases in order: the HTTP endpoint, the pool, the database.
func (s *server) close() {
	if s.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.http.Shutdown(ctx)
		cancel()
	}
	if s.closeConsole != nil {
		s.closeConsole()
	}
	s.st.Close()
	s.stopDB()
}

func (s *server) serveHTTP(d *daemon.Daemon, reg *prometheus.Registry) error {
	if s.cfg.MetricsAddr == "off" {
		return nil
	}
	ln := s.ln
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.cfg.MetricsAddr); err != nil {
			return err
		}
	}
	s.metricsAddr = ln.Addr().String()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && s.cfg.ConsoleToken == "" {
		s.log.Warn("metrics_addr is beyond loopback but console_token is empty: clients beyond loopback are refused", "addr", s.metricsAddr)
	}
	console, closeConsole, err := newConsole(context.Background(), s.st, s.cfg, s.log)
	if err != nil {
		ln.Close()
		return err
	}
	s.closeConsole = closeConsole
	mux := http.NewServeMux()
	console.Mount(mux)
	// Clients beyond loopback need the token for these too.
	mux.Handle("/metrics", console.Protect(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	mux.Handle("/healthz", console.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})))
	mux.Handle("/readyz", console.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := d.Ready(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})))
	s.http = httpserver.New(mux, httpserver.Limits{})
	if s.cfg.ConsoleTLSCert != "" {
		cert, key := s.cfg.ConsoleTLSCert, s.cfg.ConsoleTLSKey
		go func() { _ = s.http.ServeTLS(ln, cert, key) }()
		return nil
	}
	go func() { _ = s.http.Serve(ln) }()
	return nil
}

// daemonConfig builds the daemon's configuration and its Telegram dialer.
func (s *server) daemonConfig(ctx context.Context, simulate bool, seed int64, rate float64, reg prometheus.Registerer) (daemon.Config, daemon.Dialer, error) {
	c := s.cfg
	tmpl, err := caption.Parse(c.Caption)
	if err != nil {
		return daemon.Config{}, nil, fmt.Errorf("caption: %w", err)
	}
	dcfg := daemon.Config{
		Silent:  c.Silent,
		Workers: c.Workers, QueueCapacity: c.QueueCapacity, Rate: c.Rate,
		SendRate: c.SendRate, SendInFlight: c.SendInFlight,
		Ingest: ingest.Config{
			SetSettle: c.SetSettle.Duration, SetMaxWait: c.SetMaxWait.Duration,
			DownloadStall: c.DownloadStallTimeout.Duration, DownloadBudget: int64(c.DownloadBudget),
			DeadLetterDelay: c.DeadLetterDelay.Duration, DeadLetterAttempts: c.DeadLetterAttempts,
			Repacks: c.Repacks, DeadLetterBroken: !c.DeliverBroken, Caption: tmpl,
		},
		Retry:        ingest.RetryConfig{Interval: c.RetryInterval.Duration},
		Rescan:       rescan.Config{Interval: c.RescanInterval.Duration, Window: c.RescanWindow.Duration},
		DrainTimeout: c.DrainTimeout.Duration,
		SendTimeout:  c.SendTimeout.Duration,
		LeaseTTL:     c.LeaseTTL.Duration,
		DrainAlert:   c.DeliveryDrainAlert.Duration,
		Backfill:     ingest.BackfillConfig{Rate: c.BackfillRate},
		DataDir:      c.DataDir,
		Logger:       s.log,
		Registry:     reg,
	}
	dcfg.Catchup.Interval = c.CatchupInterval.Duration
	if simulate {
		return s.simulated(dcfg, seed, rate)
	}
	dcfg.Routes = c.RouteSpecs()
	for _, ref := range c.Destinations {
		r, _ := config.ParseChatRef(ref) // validated by Load
		if r.Username != "" {
			dcfg.DestinationNames = append(dcfg.DestinationNames, r.Username)
		} else {
			dcfg.Destinations = append(dcfg.Destinations, r.ID)
		}
	}
	for _, a := range c.Accounts {
		acct := daemon.Account{Name: a.Name, Topics: map[string][]int64{}, History: map[string]daemon.History{}}
		for _, src := range a.Sources {
			r, _ := config.ParseChatRef(src.Chat)
			key := strconv.FormatInt(int64(r.ID), 10)
			if r.Username != "" {
				acct.Named = append(acct.Named, r.Username)
				key = "@" + r.Username
			} else {
				acct.Sources = append(acct.Sources, r.ID)
			}
			if len(src.Topics) > 0 {
				acct.Topics[key] = src.Topics
			}
			if none, since, _ := config.ParseHistory(src.History); none || since > 0 {
				acct.History[key] = daemon.History{None: none, Since: since}
			}
		}
		dcfg.Accounts = append(dcfg.Accounts, acct)
	}
	proxies := map[string]tg.Proxy{}
	for _, a := range c.Accounts {
		if px, ok := c.ProxyOf(a); ok {
			proxies[a.Name] = px
		}
	}
	dial := func(ctx context.Context, account string) (tg.Client, error) {
		var proxy *tg.Proxy
		if px, ok := proxies[account]; ok {
			proxy = &px
		}
		return tdlib.New(ctx, tdlib.Config{
			Account: account, StateDir: filepath.Join(c.DataDir, "accounts", account),
			APIID: c.APIID, APIHash: c.APIHash, Logger: s.log, Proxy: proxy,
		})
	}
	return dcfg, dial, nil
}

// simulated wires the daemon to an in-process simulated world that
// publishes rate items per second.
func (s *server) simulated(dcfg daemon.Config, seed int64, rate float64) (daemon.Config, daemon.Dialer, error) {
	world, gen := simulatedWorld(seed, s.cfg.DataDir)
	dcfg.Destinations = gen.Destinations()
	for _, name := range gen.Accounts() {
		a := daemon.Account{Name: name}
		for _, src := range gen.Sources() {
			if src.Account == name {
				a.Sources = append(a.Sources, src.Chat)
			}
		}
		dcfg.Accounts = append(dcfg.Accounts, a)
	}
	s.publish = func(ctx context.Context) {
		if rate > 0 {
			service.Ticks(ctx, time.Duration(float64(time.Second)/rate), nil, func(context.Context) { gen.Step() })
		}
	}
	return dcfg, func(ctx context.Context, account string) (tg.Client, error) { return world.Client(account), nil }, nil
}

// watchdog feeds systemd's watchdog at half its interval while the daemon
// is healthy. A stuck or broken daemon stops feeding it, and systemd
// restarts the service.
func watchdog(ctx context.Context, log *slog.Logger, d *daemon.Daemon) {
	interval, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	healthy := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, interval/2)
		err := d.Health(hctx)
		cancel()
		switch {
		case err == nil:
			notify(log, sddaemon.SdNotifyWatchdog)
			if !healthy {
				log.Info("healthy again")
			}
			healthy = true
		case healthy:
			log.Error("unhealthy: not feeding the watchdog", "err", err)
			healthy = false
		}
	}
}

func notify(log *slog.Logger, state string) {
	if _, err := sddaemon.SdNotify(false, state); err != nil {
		log.Warn("notify systemd", "state", state, "err", err)
	}
}

// configuredLogger builds the logger the configuration asks for.
func configuredLogger(cfg config.Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	switch cfg.LogFormat {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return newLogger(os.Stderr, level)
}
