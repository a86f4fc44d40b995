package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"stashd/internal/config"
	"stashd/internal/pgembed"
	"stashd/internal/redact"
	"stashd/store"
)

// newFlagSet returns a flag set whose --help prints, on stdout, the
// command's description and then each of its flags with its type. A command
// adds a flag with one fs.XxxVar call.
func newFlagSet(name, usageLine, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse reports errors itself, in one line
	fs.Usage = func() {}     // and prints the help only when asked
	helpsMu.Lock()
	helps[fs] = func() { printUsage(os.Stdout, fs, usageLine, description) }
	helpsMu.Unlock()
	return fs
}

// helps holds each flag set's help printer; commands may be set up
// concurrently (the tests run them in parallel).
var (
	helpsMu sync.Mutex
	helps   = map[*flag.FlagSet]func(){}
)

// printHelp prints the help of fs's command on stdout.
func printHelp(fs *flag.FlagSet) {
	helpsMu.Lock()
	h, ok := helps[fs]
	helpsMu.Unlock()
	if ok {
		h()
	}
}

// printUsage writes the help of a command: usage line, description and
// flags ("--workers int", "--drain-timeout duration"), or no Flags section
// when the command has none.
func printUsage(w io.Writer, fs *flag.FlagSet, usageLine, description string) {
	fmt.Fprintf(w, "Usage: stashd %s\n\n%s\n", usageLine, description)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "\nFlags:\n")
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flagType(f)
		head := "  --" + f.Name
		if typ != "" {
			head += " " + typ
		}
		fmt.Fprintf(w, "%s\n    \t%s", head, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// typed is a flag value that names its own type in --help.
type typed interface{ Type() string }

// flagType returns the type shown for f ("" for a boolean) and its usage.
func flagType(f *flag.Flag) (string, string) {
	if t, ok := f.Value.(typed); ok {
		return t.Type(), f.Usage
	}
	name, usage := flag.UnquoteUsage(f)
	if name == "value" {
		name = "string"
	}
	return name, usage
}

// parse parses args, which must hold flags only, and returns the exit
// status to use when parsing ended the command (help: 0, bad flags: 2), or
// -1 to go on.
func parse(fs *flag.FlagSet, args []string) int {
	_, rc := parseArgs(fs, args, 0)
	return rc
}

// numericArg matches arguments that are values, not flags, although they
// start with a dash: negative chat ids, and CHAT/MSG references.
var numericArg = regexp.MustCompile(`^-[0-9]+(/[0-9]+)?$`)

// parseArgs parses flags and up to maxPos positional arguments in any
// order. A negative number (a channel id such as -1001234567890/17) is a
// positional argument, not a flag, and everything after "--" is positional.
// It returns the positional arguments, and the exit status to use when
// parsing ended the command (help: 0, bad flags or arguments: 2) or -1 to
// go on. Errors are one line on stderr.
func parseArgs(fs *flag.FlagSet, args []string, maxPos int) ([]string, int) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case numericArg.MatchString(a) || !strings.HasPrefix(a, "-") || a == "-":
			pos = append(pos, a)
		default:
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			// A flag that takes a value takes the next argument, whatever
			// it looks like.
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	if err := fs.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(fs)
			return nil, 0
		}
		fmt.Fprintf(os.Stderr, "stashd %s: %s (see stashd %s --help)\n", fs.Name(), flagError(err), fs.Name())
		return nil, 2
	}
	if len(pos) > maxPos {
		fmt.Fprintf(os.Stderr, "stashd %s: unexpected argument %q (see stashd %s --help)\n", fs.Name(), pos[maxPos], fs.Name())
		return nil, 2
	}
	return pos, -1
}

// flagError rewrites the flag package's messages to name flags as --help
// shows them.
func flagError(err error) string {
	s := err.Error()
	s = strings.Replace(s, "flag provided but not defined: -", "unknown flag --", 1)
	if rest, ok := strings.CutPrefix(s, "invalid value "); ok {
		// invalid value "x" for flag -workers: parse error
		if v, f, ok := strings.Cut(rest, " for flag -"); ok {
			name, why, _ := strings.Cut(f, ": ")
			if strings.Contains(why, v) {
				return fmt.Sprintf("--%s: %s", name, why)
			}
			return fmt.Sprintf("--%s: %s is not valid: %s", name, v, why)
		}
	}
	return strings.Replace(s, "flag needs an argument: -", "flag needs a value: --", 1)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newLogger logs text on a terminal and JSON otherwise.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// database returns the URL to use: url when set, otherwise a private
// PostgreSQL cluster under dataDir/postgres — the one another stashd
// process runs there, or one started now. stop stops a cluster started now
// (a no-op otherwise); done, when not nil, is closed if that cluster exits.
func database(ctx context.Context, url, dataDir string, log *slog.Logger) (dbURL string, done <-chan struct{}, stop func(), err error) {
	if url != "" {
		return url, nil, func() {}, nil
	}
	dir := filepath.Join(dataDir, "postgres")
	if url, ok := pgembed.Running(ctx, dir); ok {
		// Another stashd process (a daemon or a demo) runs it: share it.
		return url, nil, func() {}, nil
	}
	log.Info("starting the embedded PostgreSQL", "dir", dir)
	c, err := pgembed.Start(ctx, pgembed.Config{Dir: dir, Logger: log})
	if err != nil {
		return "", nil, nil, fmt.Errorf("embedded database: %w", err)
	}
	return c.URL(""), c.Done(), func() {
		if err := c.Stop(); err != nil {
			log.Warn("stop embedded PostgreSQL", "err", err)
		}
	}, nil
}

// storeFlags are the flags of commands that read the catalogue. The
// catalogue is found as serve finds it: --database-url and --data-dir,
// then STASHD_DATABASE_URL and STASHD_DATA_DIR, then the --config file's
// database_url and data_dir, then the default (/var/lib/stashd).
type storeFlags struct {
	url, dataDir, database, configPath *string
	// urlFrom names where the URL came from: the flag, the variable or
	// the file's setting (resolve sets it).
	urlFrom *string
	fs      *flag.FlagSet
	// stderr receives check's warnings; os.Stderr unless a command sets
	// another.
	stderr io.Writer
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		url:        fs.String("database-url", "", "PostgreSQL URL of the catalogue (env STASHD_DATABASE_URL, or the --config file's database_url); empty: the embedded database under --data-dir"),
		dataDir:    fs.String("data-dir", "", "data directory of the embedded database (env STASHD_DATA_DIR, or the --config file's data_dir; default /var/lib/stashd)"),
		database:   fs.String("database", "", "database name on the server (the demo uses stashd_demo)"),
		configPath: fs.String("config", os.Getenv("STASHD_CONFIG"), "TOML configuration file whose data_dir and database_url to use, as serve reads it (env STASHD_CONFIG)"),
		urlFrom:    new("--database-url"),
		fs:         fs,
		stderr:     os.Stderr,
	}
}

// resolve fills --database-url and --data-dir the way serve settles them:
// a flag given wins, then the environment, then the configuration file,
// then the default.
func (f storeFlags) resolve() error {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	var file struct {
		DataDir     string `toml:"data_dir"`
		DatabaseURL string `toml:"database_url"`
	}
	if *f.configPath != "" {
		if err := config.DecodeFile(*f.configPath, &file); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("--config: %s does not exist", *f.configPath)
			}
			return fmt.Errorf("--config: %s", oneLine(err))
		}
	}
	if !set["database-url"] {
		switch {
		case os.Getenv("STASHD_DATABASE_URL") != "":
			*f.url, *f.urlFrom = os.Getenv("STASHD_DATABASE_URL"), "STASHD_DATABASE_URL"
		case file.DatabaseURL != "":
			*f.url, *f.urlFrom = file.DatabaseURL, *f.configPath+": database_url"
		default:
			*f.url = ""
		}
	}
	if !set["data-dir"] {
		*f.dataDir = cmp.Or(os.Getenv("STASHD_DATA_DIR"), file.DataDir, config.DefaultDataDir)
	}
	return nil
}

// check settles and validates the flags before anything is opened, and
// warns of a password given in --database-url.
func (f storeFlags) check() error {
	for _, w := range config.FlagWarnings(f.fs) {
		fmt.Fprintf(f.stderr, "stashd %s: warning: %s\n", f.fs.Name(), w)
	}
	if err := f.resolve(); err != nil {
		return err
	}
	if *f.url != "" {
		if _, err := pgconn.ParseConfig(*f.url); err != nil {
			return fmt.Errorf("%s: %q is not a PostgreSQL URL (postgres://user@host:5432/db or \"host=... dbname=...\")", *f.urlFrom, redact.URL(*f.url))
		}
	}
	if *f.url == "" && *f.dataDir == "" {
		return errors.New("--data-dir: must not be empty without --database-url")
	}
	return nil
}

// open opens an existing catalogue the flags name, for reading and small
// edits: it never creates a cluster, a database or tables.
func (f storeFlags) open(ctx context.Context) (*store.Store, func(), error) {
	return openExisting(ctx, *f.url, *f.urlFrom, *f.dataDir, *f.database, false)
}

// openReadOnly is open for reading only: no migration, read-only
// transactions, so the role may be granted only SELECT.
func (f storeFlags) openReadOnly(ctx context.Context) (*store.Store, func(), error) {
	return openExisting(ctx, *f.url, *f.urlFrom, *f.dataDir, *f.database, true)
}

// openExisting opens the catalogue: url when set, otherwise the embedded
// database under dataDir (shared with the process running it, or started
// for this command when its cluster exists). name, when set, selects
// another database on that server. A missing cluster, database or
// catalogue is an error naming where it looked; nothing is created.
func openExisting(ctx context.Context, url, urlFrom, dataDir, name string, readOnly bool) (*store.Store, func(), error) {
	where := "the database at " + urlFrom
	if url == "" {
		dir := filepath.Join(dataDir, "postgres")
		if !pgembed.Exists(dir) {
			return nil, nil, fmt.Errorf("no embedded database under %s (wrong --data-dir? or give --database-url)", dir)
		}
		where = "the embedded PostgreSQL under " + dir
	}
	log := newLogger(os.Stderr, slog.LevelError)
	dbURL, _, stopDB, err := database(ctx, url, dataDir, log)
	if err != nil {
		return nil, nil, err
	}
	if name != "" {
		if dbURL, err = withDatabase(dbURL, name); err != nil {
			stopDB()
			return nil, nil, err
		}
	}
	dbName := name
	if dbName == "" {
		dbName = databaseName(dbURL)
	}
	if err := hasCatalogue(ctx, dbURL); err != nil {
		stopDB()
		if errors.Is(err, errNoCatalogue) {
			return nil, nil, fmt.Errorf("no stashd catalogue in database %q of %s (the demo's is --database stashd_demo)", dbName, where)
		}
		return nil, nil, fmt.Errorf("open database %q of %s: %s", dbName, where, redact.Message(dbError(err), dbURL))
	}
	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 2, ReadOnly: readOnly})
	if err != nil {
		stopDB()
		return nil, nil, fmt.Errorf("open database %q of %s: %s", dbName, where, redact.Message(dbError(err), dbURL))
	}
	return st, func() { st.Close(); stopDB() }, nil
}

var errNoCatalogue = errors.New("no catalogue")

// hasCatalogue returns errNoCatalogue when the database at dbURL does not
// exist or holds no stashd schema, without creating either.
func hasCatalogue(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "3D000" { // invalid_catalog_name
			return errNoCatalogue
		}
		return err
	}
	defer conn.Close(ctx)
	var found bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('stashd_schema_version') IS NOT NULL`).Scan(&found); err != nil {
		return fmt.Errorf("look for the catalogue: %w", err)
	}
	if !found {
		return errNoCatalogue
	}
	return nil
}

// databaseName returns the database a connection string names ("" when it
// names none).
func databaseName(connStr string) string {
	if i := strings.Index(connStr, "dbname="); i >= 0 {
		return strings.Fields(connStr[i+len("dbname="):])[0]
	}
	if _, after, ok := strings.Cut(connStr, "://"); ok {
		if _, path, ok := strings.Cut(after, "/"); ok {
			path, _, _ = strings.Cut(path, "?")
			return path
		}
	}
	return ""
}

// dbError describes a failure to reach PostgreSQL in one line: the
// database, user and address, and the root cause once (pgx repeats it per
// address tried and across lines).
func dbError(err error) string {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || ce.Config == nil {
		return oneLine(err)
	}
	var causes []string
	var leaves func(error)
	leaves = func(e error) {
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				leaves(x)
			}
		case interface{ Unwrap() error }:
			if x := u.Unwrap(); x != nil {
				leaves(x)
				return
			}
			causes = append(causes, e.Error())
		default:
			causes = append(causes, e.Error())
		}
	}
	leaves(ce)
	return fmt.Sprintf("cannot connect to database %q as %s at %s: %s", ce.Config.Database, ce.Config.User,
		net.JoinHostPort(ce.Config.Host, strconv.Itoa(int(ce.Config.Port))), oneLine(errors.New(strings.Join(causes, "\n"))))
}

// oneLine flattens an error that spans lines (pgx lists one dial error per
// address) into one line without repeating itself.
func oneLine(err error) string {
	var parts []string
	seen := map[string]bool{}
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" && !seen[l] {
			seen[l] = true
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// probabilities reports whether every flag of flags (name to value) is a
// probability, printing the first that is not.
func probabilities(cmd string, flags map[string]float64) bool {
	names := slices.Sorted(maps.Keys(flags))
	for _, name := range names {
		if p := flags[name]; p < 0 || p > 1 || p != p {
			fmt.Fprintf(os.Stderr, "stashd %s: --%s must be between 0 and 1\n", cmd, name)
			return false
		}
	}
	return true
}

// printErr prints err on w as stashd cmd: ..., one line per problem: an
// error that joins several (every bad [[routes]] field) gives each its
// line, each with the prefix. cmd may name a flag too ("demo: --routes").
func printErr(w io.Writer, cmd string, err error) {
	for l := range strings.SplitSeq(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			fmt.Fprintf(w, "stashd %s: %s\n", cmd, l)
		}
	}
}

// badFlag prints a bad flag's problem as stashd cmd: ... and returns the
// exit status of a usage error.
func badFlag(cmd, format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "stashd %s: %s\n", cmd, fmt.Sprintf(format, args...))
	return 2
}
