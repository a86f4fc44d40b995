package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"stashd/internal/config"
	"stashd/internal/pgembed"
	"stashd/migrations"
	"stashd/tg"
	"stashd/tg/tdlib"
)

const doctorHelp = `Says what is wrong, in order, each check ✓ or ✗ with its fix:

  the configuration parses (as serve reads it: --config, STASHD_*, flags);
  the database is reachable, migrated and writable (an embedded database
    is only opened, never created);
  the data directory exists with safe permissions and is writable;
  TDLib loads (its version);
  per account: Telegram is reachable within 10 s (through the proxy if
    set), the account is logged in, Premium or not;
  per source: accessible (member, or a public chat), its history readable;
  per destination: some account can post (and create topics where routes
    deliver by topic name);
  free disk space against the download budget.

Exits 1 when a check fails. With --simulate it checks serve --simulate's
world and data directory instead of TDLib accounts.`

func runDoctor(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return doctorCommand(ctx, args, os.Stdout, os.Stderr)
}

// doctorCommand is stashd doctor with its output streams.
func doctorCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("doctor", "doctor [--config FILE] [flags]", doctorHelp)
	tf := addTelegramFlags(fs)
	jsonOut := fs.Bool("json", false, "print one JSON object")
	if rc := parse(fs, args); rc >= 0 {
		return rc
	}
	d := &doctor{}
	cfg, p, err := tf.load(fs, config.Daemon)
	if err != nil {
		d.add("config", "parses", false, oneLine(err), "correct the setting it names (every setting and its default: README.md, deploy/stashd.example.toml)")
	} else {
		d.add("config", "parses", true, configWhere(*tf.configPath), "")
		d.run(ctx, doctorInput{plan: p, databaseURL: cfg.DatabaseURL, dataDir: cfg.DataDir,
			budget: int64(cfg.DownloadBudget)})
	}
	rep := d.report()
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		printDoctor(stdout, rep)
	}
	if len(rep.Failed) > 0 {
		return 1
	}
	return 0
}

func configWhere(path string) string {
	if path == "" {
		return "no file: defaults, STASHD_* variables and flags"
	}
	return path
}

// doctorCheck is one check: what it looked at (subject), what it checked,
// the outcome, and what to do about a failure.
type doctorCheck struct {
	Subject string `json:"subject"`
	Check   string `json:"check"`
	OK      bool   `json:"ok"`
	Detail  string `json:"detail,omitempty"`
	Fix     string `json:"fix,omitempty"`
}

// doctorReport is every check in order, and the subjects that failed one
// ("database", "account main", "source -1001234567890" …).
type doctorReport struct {
	Checks []doctorCheck `json:"checks"`
	Failed []string      `json:"failed"`
}

type doctor struct {
	checks []doctorCheck
	// reach bounds the wait for an account's connection; zero means
	// reachTimeout.
	reach time.Duration
}

func (d *doctor) add(subject, check string, ok bool, detail, fix string) {
	if ok {
		fix = ""
	}
	d.checks = append(d.checks, doctorCheck{Subject: subject, Check: check, OK: ok, Detail: detail, Fix: fix})
}

func (d *doctor) report() doctorReport {
	rep := doctorReport{Checks: d.checks, Failed: []string{}}
	for _, c := range d.checks {
		if !c.OK && !slices.Contains(rep.Failed, c.Subject) {
			rep.Failed = append(rep.Failed, c.Subject)
		}
	}
	return rep
}

// doctorInput is what the checks after the configuration look at.
type doctorInput struct {
	plan plan
	// databaseURL is the catalogue; empty: the embedded one under dataDir.
	databaseURL string
	dataDir     string
	// budget is each account's download budget in bytes.
	budget int64
}

// run runs every check after the configuration, in order.
func (d *doctor) run(ctx context.Context, in doctorInput) {
	d.database(ctx, in.databaseURL, in.dataDir)
	d.dataDir(in.dataDir)
	if in.plan.simulated {
		d.add("tdlib", "loads", true, "not needed: the accounts are simulated", "")
	} else if v, err := tdlib.Version(); err != nil {
		d.add("tdlib", "loads", false, oneLine(err), "build stashd with TDLib (make build-tdlib) and install libtdjson.so where the binary finds it")
	} else {
		d.add("tdlib", "loads", true, "TDLib "+v, "")
	}
	d.telegram(ctx, in.plan)
	d.disk(in.dataDir, in.budget, len(in.plan.accounts))
}

// database checks that the catalogue answers, is migrated to this
// binary's schema and accepts writes. An embedded cluster that does not
// exist is reported, never created.
func (d *doctor) database(ctx context.Context, url, dataDir string) {
	const subject = "database"
	fixReach := "start PostgreSQL or correct database_url (postgres://user@host:5432/db)"
	if url == "" {
		dir := filepath.Join(dataDir, "postgres")
		if !pgembed.Exists(dir) {
			d.add(subject, "reachable", false, "no embedded database under "+dir,
				"check data_dir; stashd serve creates the embedded database at its first start, or set database_url")
			return
		}
		dbURL, _, stop, err := database(ctx, "", dataDir, slog.New(slog.DiscardHandler))
		if err != nil {
			d.add(subject, "reachable", false, oneLine(err), "see the embedded PostgreSQL's log under "+dir)
			return
		}
		defer stop()
		url, fixReach = dbURL, "see the embedded PostgreSQL's log under "+dir
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, url)
	if err != nil {
		d.add(subject, "reachable", false, dbError(err), fixReach)
		return
	}
	defer conn.Close(context.Background())
	d.add(subject, "reachable", true, "database "+conn.Config().Database, "")

	want := migrationCount()
	var have int
	err = conn.QueryRow(cctx, `SELECT CASE WHEN to_regclass('stashd_schema_version') IS NULL THEN -1
		ELSE (SELECT max(version) FROM stashd_schema_version) END`).Scan(&have)
	switch {
	case err != nil:
		d.add(subject, "migrated", false, oneLine(err), "check the role's rights on the database")
		return
	case have < 0:
		d.add(subject, "migrated", false, "no stashd catalogue in it", "start stashd serve once: it creates and migrates the catalogue")
		return
	case have < want:
		d.add(subject, "migrated", false, fmt.Sprintf("schema version %d, this stashd needs %d", have, want), "start stashd serve: it migrates at start")
	case have > want:
		d.add(subject, "migrated", false, fmt.Sprintf("schema version %d is newer than this stashd's %d", have, want), "run the newer stashd that migrated it")
	default:
		d.add(subject, "migrated", true, fmt.Sprintf("schema version %d", have), "")
	}
	var writable bool
	err = conn.QueryRow(cctx, `SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'
		AND has_table_privilege('packages', 'INSERT, UPDATE, DELETE')`).Scan(&writable)
	switch {
	case err != nil:
		d.add(subject, "writable", false, oneLine(err), "grant the role INSERT, UPDATE and DELETE on stashd's tables")
	case !writable:
		d.add(subject, "writable", false, "read-only (a standby, a read-only transaction default, or a role without write rights)",
			"point database_url at the primary with a role that owns stashd's tables")
	default:
		d.add(subject, "writable", true, "", "")
	}
}

// migrationCount is the schema version this binary migrates to.
func migrationCount() int {
	n := 0
	_ = fs.WalkDir(migrations.FS, ".", func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(path, ".sql") {
			n++
		}
		return nil
	})
	return n
}

// dataDir checks the data directory: present, a directory, writable by
// this user, and not open to other users (it holds TDLib sessions).
func (d *doctor) dataDir(dir string) {
	const subject = "data dir"
	st, err := os.Stat(dir)
	if err != nil {
		d.add(subject, "exists", false, oneLine(err), fmt.Sprintf("create it for the daemon's user: install -d -m 0700 %s (systemd's StateDirectory= does)", dir))
		return
	}
	if !st.IsDir() {
		d.add(subject, "exists", false, dir+" is not a directory", "point data_dir at a directory")
		return
	}
	d.add(subject, "exists", true, dir, "")
	if st.Mode().Perm()&0o022 != 0 || st.Mode().Perm()&0o004 != 0 {
		d.add(subject, "permissions", false, fmt.Sprintf("%s is mode %#o: other users can read or change TDLib sessions", dir, st.Mode().Perm()),
			"chmod 0700 "+dir+" (0711 when the embedded PostgreSQL runs as another user)")
	} else {
		d.add(subject, "permissions", true, fmt.Sprintf("mode %#o", st.Mode().Perm()), "")
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		d.add(subject, "writable", false, oneLine(err), "chown the directory to the user stashd runs as")
		return
	}
	f.Close()
	os.Remove(f.Name())
	d.add(subject, "writable", true, "", "")
}

// disk checks the free space of the data directory's file system against
// what the accounts may hold at once (download_budget each).
func (d *doctor) disk(dir string, budget int64, accounts int) {
	const subject = "disk"
	var s unix.Statfs_t
	if err := unix.Statfs(dir, &s); err != nil {
		d.add(subject, "free space", false, oneLine(err), "check data_dir")
		return
	}
	free := int64(s.Bavail) * int64(s.Bsize)
	need := budget * int64(max(accounts, 1))
	detail := fmt.Sprintf("%s free, downloads need up to %s (download_budget %s × %d accounts)",
		formatBytes(free), formatBytes(need), formatBytes(budget), max(accounts, 1))
	d.add(subject, "free space", free >= need, detail, "free space under data_dir, or lower download_budget")
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// reachTimeout is how long an account has to reach Telegram.
const reachTimeout = 10 * time.Second

// telegram checks every account, then every source through the account
// that watches it, then every destination through any account.
func (d *doctor) telegram(ctx context.Context, p plan) {
	clients := map[string]tg.Client{}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	for _, a := range p.accounts {
		if c := d.account(ctx, p, a.name); c != nil {
			clients[a.name] = c
		}
	}
	for _, a := range p.accounts {
		c := clients[a.name]
		for _, ref := range a.sources {
			subject := "source " + refString(ref)
			if c == nil {
				d.add(subject, "accessible", false, "account "+a.name+" is not available", "fix account "+a.name+" first")
				continue
			}
			d.source(ctx, c, a.name, ref, subject)
		}
	}
	for _, dest := range p.destinations {
		d.destination(ctx, p, clients, dest)
	}
}

// account starts the account's client and checks that it is logged in
// and reaches Telegram; it returns the client, nil when unusable.
func (d *doctor) account(ctx context.Context, p plan, name string) tg.Client {
	subject := "account " + name
	login := "run stashd login --account " + name + " as the user the daemon runs as"
	dctx, cancel := context.WithTimeout(ctx, reachTimeout+5*time.Second)
	defer cancel()
	c, err := p.dial(dctx, name)
	if err != nil {
		var nl *tdlib.NotLoggedInError
		if errors.As(err, &nl) {
			d.add(subject, "logged in", false, "authorization state "+nl.State, login)
		} else {
			d.add(subject, "logged in", false, oneLine(err), login)
		}
		return nil
	}
	states := watchConnection(c)
	reach := cmp.Or(d.reach, reachTimeout)
	via, fix := "", "check the network and the firewall, or set a proxy (the proxy setting)"
	if px, ok := p.proxies[name]; ok {
		via = " through proxy " + px.String()
		fix = "check that the proxy " + px.String() + " is up and lets Telegram through, and its credentials"
	}
	select {
	case <-states.ready:
		d.add(subject, "reaches Telegram", true, "connection ready"+via, "")
	case <-time.After(reach):
		d.add(subject, "reaches Telegram", false, fmt.Sprintf("no connection within %s%s (state %s)", reach, via, states.last()), fix)
	case <-ctx.Done():
	}
	me, err := c.GetMe(dctx)
	if err != nil {
		d.add(subject, "logged in", false, oneLine(err), login)
		_ = c.Close()
		return nil
	}
	premium := "not Premium (uploads up to 2000 MB)"
	if me.IsPremium {
		premium = "Premium (uploads up to 4000 MB)"
	}
	d.add(subject, "logged in", true, fmt.Sprintf("as %s, user id %d, %s", displayUser(me.Username), me.ID, premium), "")
	if err := c.LoadChats(dctx); err != nil {
		d.add(subject, "chat lists load", false, oneLine(err), "try again; if it persists, run stashd login --account "+name)
	}
	return c
}

// source checks that the account can reach and read ref.
func (d *doctor) source(ctx context.Context, c tg.Client, account string, ref config.ChatRef, subject string) {
	ch, err := resolve(ctx, c, ref)
	if err != nil {
		d.add(subject, "accessible", false, oneLine(err), fmt.Sprintf("join the chat with account %s, or correct the source (stashd chats --account %s lists its chats)", account, account))
		return
	}
	if dir, ok := c.(tg.Directory); ok && isSupergroupKind(ch.Kind) {
		sg, err := dir.GetSupergroup(ctx, ch.ID)
		switch {
		case err != nil:
			d.add(subject, "accessible", false, oneLine(err), "join the chat with account "+account)
			return
		case !sg.IsMember() && sg.Username == "":
			d.add(subject, "accessible", false, fmt.Sprintf("%q: account %s is %s and the chat is private", ch.Title, account, sg.Status),
				fmt.Sprintf("add account %s to the chat again, or remove the source", account))
			return
		case !sg.IsMember():
			d.add(subject, "accessible", true, fmt.Sprintf("%q: public, account %s is not a member (join it for live updates)", ch.Title, account), "")
		default:
			d.add(subject, "accessible", true, fmt.Sprintf("%q: account %s is %s", ch.Title, account, sg.Status), "")
		}
	} else {
		d.add(subject, "accessible", true, fmt.Sprintf("%q", ch.Title), "")
	}
	if _, err := c.SearchChatMessages(ctx, tg.Search{Chat: ch.ID, Limit: 1, Filter: tg.FilterDocument}); err != nil {
		d.add(subject, "history readable", false, oneLine(err), fmt.Sprintf("add account %s to the chat again, or remove the source", account))
		return
	}
	d.add(subject, "history readable", true, "", "")
}

// destination checks that some account can post to dest, and create
// topics there when a route delivers by topic name.
func (d *doctor) destination(ctx context.Context, p plan, clients map[string]tg.Client, dest planDestination) {
	subject := "destination " + refString(dest.ref)
	var notes []string
	for _, a := range p.accounts {
		c := clients[a.name]
		if c == nil {
			continue
		}
		ch, err := resolve(ctx, c, dest.ref)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: %s", a.name, oneLine(err)))
			continue
		}
		dir, ok := c.(tg.Directory)
		if !ok || !isSupergroupKind(ch.Kind) {
			d.add(subject, "can post", true, fmt.Sprintf("%q through account %s", ch.Title, a.name), "")
			return
		}
		sg, err := dir.GetSupergroup(ctx, ch.ID)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: %s", a.name, oneLine(err)))
			continue
		}
		if !sg.CanPost || dest.topics && !sg.CanManageTopics {
			notes = append(notes, fmt.Sprintf("%s is %s", a.name, sg.Status))
			continue
		}
		detail := fmt.Sprintf("%q through account %s (%s)", ch.Title, a.name, sg.Status)
		if dest.topics {
			detail += ", may create topics"
		}
		d.add(subject, "can post", true, detail, "")
		return
	}
	need := "an administrator allowed to post messages"
	if dest.topics {
		need += " and to manage topics (routes deliver by topic name)"
	}
	d.add(subject, "can post", false, "no account can: "+strings.Join(notes, "; "), "make one of the accounts "+need)
}

// resolve finds the chat ref names: getChat for an id, searchPublicChat
// for a username.
func resolve(ctx context.Context, c tg.Client, ref config.ChatRef) (tg.Chat, error) {
	if ref.Username != "" {
		ch, err := c.SearchPublicChat(ctx, ref.Username)
		if err != nil {
			return tg.Chat{}, err
		}
		return c.GetChat(ctx, ch.ID)
	}
	return c.GetChat(ctx, ref.ID)
}

func isSupergroupKind(k tg.ChatKind) bool {
	return k == tg.KindChannel || k == tg.KindSupergroup || k == tg.KindForum
}

func printDoctor(w io.Writer, rep doctorReport) {
	for _, c := range rep.Checks {
		mark := "✓"
		if !c.OK {
			mark = "✗"
		}
		line := fmt.Sprintf("%s %s: %s", mark, c.Subject, c.Check)
		if c.Detail != "" {
			line += " — " + c.Detail
		}
		fmt.Fprintln(w, line)
		if c.Fix != "" {
			fmt.Fprintf(w, "    fix: %s\n", c.Fix)
		}
	}
	if len(rep.Failed) == 0 {
		fmt.Fprintln(w, "\nall checks passed")
		return
	}
	fmt.Fprintf(w, "\n%d failed: %s\n", len(rep.Failed), strings.Join(rep.Failed, ", "))
}
