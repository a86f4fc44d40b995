package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"stashd/internal/pgembed"
	"stashd/store"
)

// newFlagSet returns a flag set whose --help prints the command's
// description before its flags.
func newFlagSet(name, usageLine, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: stashd %s\n\n%s\n\nFlags:\n", usageLine, description)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args and returns the exit status to use when parsing ended
// the command (help: 0, bad flags: 2), or -1 to go on.
func parse(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "stashd %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2
	}
	return -1
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

// storeFlags are the flags of commands that read the catalogue.
type storeFlags struct {
	url, dataDir, database *string
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		url:      fs.String("database-url", os.Getenv("STASHD_DATABASE_URL"), "PostgreSQL URL of the catalogue (env STASHD_DATABASE_URL); empty: the embedded database under --data-dir"),
		dataDir:  fs.String("data-dir", envOr("STASHD_DATA_DIR", "/var/lib/stashd"), "data directory of the embedded database (env STASHD_DATA_DIR)"),
		database: fs.String("database", "", "database name on the server (the demo uses stashd_demo)"),
	}
}

// open opens the catalogue the flags name.
func (f storeFlags) open(ctx context.Context) (*store.Store, func(), error) {
	return openStore(ctx, *f.url, *f.dataDir, *f.database)
}

// openStore opens the catalogue: url when set, otherwise the embedded
// database under dataDir (shared with the process running it, or started
// for this command). name, when set, selects another database on that
// server.
func openStore(ctx context.Context, url, dataDir, name string) (*store.Store, func(), error) {
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
	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 2})
	if err != nil {
		stopDB()
		return nil, nil, err
	}
	return st, func() { st.Close(); stopDB() }, nil
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
