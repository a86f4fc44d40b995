package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"stashd/harness/chaos"
)

const chaosHelp = `Proves "nothing missed, nothing twice" for real processes. Starts three kinds
of process: stashd sim (the simulated Telegram world, served as TDLib JSON),
a private PostgreSQL cluster, and the daemon (stashd serve, linked against
the stand-in libtdjson so it speaks to the simulator through go-tdlib and the
real adapter). While the world publishes (with lost updates and network
disconnects), the daemon is killed with SIGKILL --kills times at seeded
random moments (some chosen while a download, a send or a database
transaction is in flight) and the PostgreSQL postmaster --pg-kills times
(it restarts with crash recovery); whatever dies is restarted, as systemd
would. When publishing and the kills are done, the run waits for the audit
to pass: every distinct package catalogued and delivered to every
destination, none delivered twice, incomplete sets dead letters, and no
account ever run by two sessions at once (the simulator sees every session:
a request from an older session of an account after a newer one has made
its own is a session overlap).

Failover: --instances N runs N daemons on the one database and world, each
with its own data directory (serve-N/, its own TDLib login per account) and
metrics address (logs in daemon-N.log). Kills then strike an account's
owner, read from the accounts' leases (lease_owner "host:pid"), but every
fifth strikes a standby; --pauses SIGSTOPs an owner for 1.5 to 2.5 lease
TTLs (seeded), then SIGCONTs it. The daemons run with --lease-ttl
(STASHD_LEASE_TTL). The harness reads the leases every 75 ms and reports
failovers (an account's owner changing, through no owner or not) and
longest_ownerless_seconds (the longest time an account had no owner with an
unexpired lease after its first, by the database's clock); with several
instances the run also fails when that exceeds twice the TTL.

Database failover: --pg-standby sync|async runs PostgreSQL as a primary
and a standby streaming from it (copied with pg_basebackup, synchronous or
not), and the daemons' database_url names both servers with
target_session_attrs=read-write. --pg-failovers N SIGKILLs the primary N
times at seeded moments, promotes the standby (pg_ctl promote) and copies a
new standby from it. An asynchronous standby may miss the last commits: the
catalogue rewinds, and the daemons must rebuild the lost delivery records
from the destinations (deliveries_recovered) rather than send again.

Sustained load: --send-rate sets the daemons' send budget (messages a
minute per account; Telegram allows a user account about 20). Below the
publishing rate the deliveries back up, as they do on a busy mirror: then
--audit catalogue requires every package catalogued and none delivered
twice, and counts the deliveries still waiting (delivery_backlog_end).
--kills 0 --pg-kills 0 runs without any kill. Every run reports
self_lease_losses (a daemon losing an account's lease with no kill, pause
or postmaster kill behind it), not_ready_seconds (time /readyz answered
other than 200 after a daemon's first ready), catalogue_lag_p99_seconds
(publication to catalogue row), and per daemon process its resident
memory (rss_mb start, end, max), goroutines and open files, sampled every
5 s after a minute's warm-up (every sample is in --dir's resources.csv).

The last line of stdout is one JSON object with --json; the exit status is 1
when the audit fails, 2 for bad flags. The logs of every process are in
--dir (daemon.log or daemon-N.log, sim.log, postgres/postgres.log).

The daemon binary needs the stand-in library: make build-standin builds
bin/stashd-standin (the default --daemon); make chaos runs five seeds.`

func runChaos(args []string) int {
	fs := newFlagSet("chaos", "chaos [flags]", chaosHelp)
	var o chaos.Options
	fs.IntVar(&o.Kills, "kills", 50, "how many times to SIGKILL a daemon (with --instances > 1: an account's owner, every fifth a standby; 0: never)")
	fs.IntVar(&o.Instances, "instances", 1, "how many daemons run on the one database and world")
	fs.IntVar(&o.Pauses, "pauses", 0, "how many times to SIGSTOP an account's owner for 1.5-2.5 lease TTLs, then SIGCONT it (default 5 with --instances > 1, else 0)")
	fs.DurationVar(&o.LockTTL, "lock-ttl", 0, "package lock TTL of the daemons, STASHD_LOCK_TTL, 3s..10m (default the daemon's own, 30s): a killed daemon's locks hold their packages that long")
	fs.DurationVar(&o.LeaseTTL, "lease-ttl", 0, "account lease TTL of the daemons, STASHD_LEASE_TTL (default 3s with --instances > 1, else the daemon's own)")
	fs.IntVar(&o.PGKills, "pg-kills", 5, "how many times to SIGKILL the PostgreSQL postmaster (0: never)")
	fs.StringVar(&o.PGStandby, "pg-standby", "", `run the database as a primary and a streaming standby (pg_basebackup): "sync" (synchronous_standby_names = '*') or "async"; the daemons' connection string names both servers`)
	fs.IntVar(&o.PGFailovers, "pg-failovers", 0, "how many times to SIGKILL the primary and promote the standby (pg_ctl promote), copying a new standby from it; needs --pg-standby")
	fs.Float64Var(&o.SendRate, "send-rate", 6000, "the daemons' send budget per account, messages a minute (Telegram allows a user account about 20; the simulated world has no limit)")
	fs.StringVar(&o.Audit, "audit", chaos.AuditFull, `what every published package must reach: "full" (catalogued and delivered) or "catalogue" (catalogued; deliveries may still wait, none made twice)`)
	fs.Int64Var(&o.Seed, "seed", 1, "seed of the world and of the kill moments (same seed, same run plan)")
	fs.DurationVar(&o.Duration, "duration", 45*time.Second, "how long the world publishes; kills continue after it until all are done")
	fs.Float64Var(&o.Rate, "rate", 8, "items published per second")
	fs.IntVar(&o.Sources, "sources", 4, "number of source channels and supergroups")
	fs.IntVar(&o.Accounts, "accounts", 2, "number of Telegram accounts")
	fs.IntVar(&o.ForumTopics, "forum-topics", 0, "add a forum source with this many topics (0: no forum)")
	fs.Float64Var(&o.DropUpdates, "drop-updates", 0.1, "probability that a new-message update is lost (0..1)")
	fs.BoolVar(&o.ServerView, "server-view", false, "the simulated sessions answer every request from the server's truth (default: each TDLib database answers what TDLib answers locally)")
	fs.DurationVar(&o.DisconnectEvery, "disconnect-every", 5*time.Second, "take every account offline this often, for a quarter of the period (0: never)")
	fs.DurationVar(&o.DifferenceDelay, "difference-delay", 0, "how long a simulated session takes to fetch a chat's difference, after openChat or a reconnect; longer than the daemon's 2 s view settle, its reads see chats as they were (0: the simulator's 200ms)")
	fs.DurationVar(&o.SettleTimeout, "settle-timeout", 3*time.Minute, "longest wait for the audit to pass once publishing and kills are done")
	dir := fs.String("dir", "", "working directory of the run, emptied first (default var/chaos/seed-N)")
	daemonBin := fs.String("daemon", "bin/stashd-standin", "stashd binary linked against the stand-in libtdjson, run as the daemon (make build-standin)")
	libDir := fs.String("lib-dir", "", "put this directory on the daemon's LD_LIBRARY_PATH (for a daemon built against the real TDLib: .cache/standin)")
	jsonOut := fs.Bool("json", false, "print the report as one JSON object on the last line of stdout")
	verbose := fs.Bool("v", false, "log at debug level")
	if rc := parse(fs, args); rc >= 0 {
		return rc
	}
	if msg := chaosFlagError(o); msg != "" {
		return badFlag("chaos", "%s", msg)
	}
	if !flagSet(fs, "pauses") && o.Instances > 1 {
		o.Pauses = 5
	}
	if !probabilities("chaos", map[string]float64{"drop-updates": o.DropUpdates}) {
		return 2
	}
	if _, err := os.Stat(*daemonBin); err != nil {
		fmt.Fprintf(os.Stderr, "stashd chaos: --daemon %s: %v (make build-standin builds it)\n", *daemonBin, err)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd chaos: %v\n", err)
		return 1
	}
	o.Stashd, o.Daemon, o.LibDir = self, *daemonBin, *libDir
	if !filepath.IsAbs(o.Daemon) {
		o.Daemon = "./" + o.Daemon
	}
	o.Dir = *dir
	if o.Dir == "" {
		o.Dir = filepath.Join("var", "chaos", fmt.Sprintf("seed-%d", o.Seed))
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	o.Logger = newLogger(os.Stderr, level)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := chaos.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd chaos: %v\n", err)
		return 1
	}
	if *jsonOut {
		printJSON(rep)
	} else {
		printChaosReport(rep, o.Dir)
	}
	if !rep.OK {
		return 1
	}
	return 0
}

func printChaosReport(r chaos.Report, dir string) {
	fmt.Printf("chaos seed %d: %d daemon kills (%d mid-download, %d mid-send, %d mid-transaction), %d postmaster kills, %d exits of its own\n",
		r.Seed, r.Kills, r.KillsMidDownload, r.KillsMidSend, r.KillsMidTransaction, r.PGKills, r.DaemonExits)
	if r.Instances > 1 || r.Pauses > 0 {
		fmt.Printf("%d instances, lease TTL %gs: %d kills of an owner, %d pauses; %d failovers, longest without an owner %.1fs\n",
			r.Instances, r.LeaseTTLSeconds, r.KillsOfOwners, r.Pauses, r.Failovers, r.LongestOwnerlessSeconds)
	}
	fmt.Printf("published %d archives, %d unique packages; missing %d, delivered twice %d, dead letters %d, session overlaps %d\n",
		r.PublishedArchives, r.UniquePackages, r.Missing, r.DuplicateDeliveries, r.DeadLetters, r.SessionOverlaps)
	if r.InFlightAtFreeze > 0 {
		fmt.Printf("  requests in flight at a pause's SIGSTOP, reaching the world after its SIGCONT (no overlap): %d\n", r.InFlightAtFreeze)
	}
	for _, n := range r.Audit.MissingNames {
		fmt.Printf("  missing: %s\n", n)
	}
	for _, n := range r.Audit.DuplicateNames {
		fmt.Printf("  twice: %s\n", n)
	}
	if r.Audit.FloodWaitBreaches > 0 {
		fmt.Printf("  requests inside a flood wait Telegram asked for: %d\n", r.Audit.FloodWaitBreaches)
	}
	for _, n := range r.Audit.FloodWaitBreachNames {
		fmt.Printf("  inside a flood wait: %s\n", n)
	}
	for _, n := range r.Audit.SessionOverlapNames {
		fmt.Printf("  overlap: %s\n", n)
	}
	if !r.OK {
		for _, n := range r.Audit.OtherDeadLetters {
			fmt.Printf("  dead letter: %s\n", n)
		}
	}
	if r.PendingWork > 0 {
		fmt.Printf("  work still pending: %d (set parts waiting, dead letters due)\n", r.PendingWork)
	}
	if r.PGStandby != "" {
		fmt.Printf("postgres with a %s standby: %d failovers, %d delivery records rebuilt from the destinations\n", r.PGStandby, r.PGFailovers, r.DeliveriesRecovered)
	}
	fmt.Printf("self lease losses %d, not ready %.1fs after first ready, catalogue lag p99 %.1fs, deliveries waiting at the end %d (audit: %s, send rate %g/min)\n",
		r.SelfLeaseLosses, r.NotReadySeconds, r.CatalogueLagP99Seconds, r.DeliveryBacklogEnd, r.AuditMode, r.SendRate)
	for _, p := range r.Processes {
		if p.Samples == 0 {
			continue
		}
		fmt.Printf("  daemon %d (pid %d): rss %.0f -> %.0f MiB (max %.0f), goroutines %d -> %d, open fds %d -> %d\n",
			p.Instance, p.PID, p.RSSMB.Start, p.RSSMB.End, p.RSSMB.Max, p.Goroutines.Start, p.Goroutines.End, p.OpenFDs.Start, p.OpenFDs.End)
	}
	verdict := "audit passed"
	if !r.OK {
		verdict = "AUDIT FAILED (logs in " + dir + ")"
	}
	fmt.Printf("settled %v after %.0fs; %.0fs in all: %s\n", r.Settled, r.SettleSeconds, r.ElapsedSeconds, verdict)
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// chaosFlagError says what is wrong with the numbers of o, "" when
// nothing is.
func chaosFlagError(o chaos.Options) string {
	switch {
	case o.Kills < 0:
		return fmt.Sprintf("--kills %d: not a count", o.Kills)
	case math.IsNaN(o.SendRate) || math.IsInf(o.SendRate, 0) || o.SendRate <= 0:
		return fmt.Sprintf("--send-rate %v: must be a positive number", o.SendRate)
	case o.PGStandby != "" && o.PGStandby != chaos.StandbySync && o.PGStandby != chaos.StandbyAsync:
		return fmt.Sprintf("--pg-standby %q: want %q or %q", o.PGStandby, chaos.StandbySync, chaos.StandbyAsync)
	case o.PGFailovers < 0:
		return fmt.Sprintf("--pg-failovers %d: not a count", o.PGFailovers)
	case o.PGFailovers > 0 && o.PGStandby == "":
		return fmt.Sprintf("--pg-failovers %d: needs --pg-standby sync or async", o.PGFailovers)
	case o.Audit != chaos.AuditFull && o.Audit != chaos.AuditCatalogue:
		return fmt.Sprintf("--audit %q: want %q or %q", o.Audit, chaos.AuditFull, chaos.AuditCatalogue)
	case o.PGKills < 0:
		return fmt.Sprintf("--pg-kills %d: not a count", o.PGKills)
	case o.Duration < time.Second:
		return fmt.Sprintf("--duration %v: at least 1s", o.Duration)
	case !(o.Rate > 0) || math.IsInf(o.Rate, 0):
		return fmt.Sprintf("--rate %v: must be positive", o.Rate)
	case o.Instances < 1:
		return fmt.Sprintf("--instances %d: at least one", o.Instances)
	case o.Pauses < 0:
		return fmt.Sprintf("--pauses %d: not a count", o.Pauses)
	case o.LeaseTTL < 0 || o.LeaseTTL > 0 && o.LeaseTTL < time.Second:
		return fmt.Sprintf("--lease-ttl %v: at least 1s", o.LeaseTTL)
	case o.LockTTL < 0 || o.LockTTL > 0 && (o.LockTTL < 3*time.Second || o.LockTTL > 10*time.Minute):
		return fmt.Sprintf("--lock-ttl %v: 3s..10m, as the daemon's lock_ttl", o.LockTTL)
	}
	return ""
}
