package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"stashd/store"
	"stashd/tg"
	"stashd/web"
)

const searchHelp = `Finds packages whose name, or the path of any file listed inside them,
contains QUERY (case-insensitive), and prints each with its best matching
file, its size, its source, when it was catalogued, and t.me links to the
origin message and to every delivered copy. Packages whose name matches come
first, then exact file names, file names starting with QUERY, and other
paths. An empty QUERY lists every package, newest first. A QUERY of one or
two characters cannot use the trigram indexes: each page then reads a
bounded stretch of the catalogue, newest first, and may hold fewer
packages than --limit, or none, with a cursor to read on.

The catalogue is opened read-only (no migration, read-only transactions), so
--database-url may name a role granted only SELECT. Names are printed with
control and invisible characters escaped (\x1b, \u202e); --json prints them
as they are, JSON-escaped.

Sizes take K, M, G, T suffixes (powers of 1024): --min-size 10M.
--since and --until take a date (2006-01-02) or an RFC 3339 time.`

func runSearch(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return searchCommand(ctx, args, os.Stdout, os.Stderr)
}

// searchCommand is stashd search with its output streams.
func searchCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("search", "search QUERY [flags]", searchHelp)
	fs.SetOutput(stderr)
	db := addStoreFlags(fs)
	db.stderr = stderr
	format := fs.String("format", "", "only packages of this format (zip, rar, 7z, tar…)")
	minSize := fs.String("min-size", "", "only packages of at least this total size")
	maxSize := fs.String("max-size", "", "only packages of at most this total size")
	source := fs.Int64("source", 0, "only packages posted in this chat id (as origin or re-post)")
	since := fs.String("since", "", "only packages catalogued at or after this date")
	until := fs.String("until", "", "only packages catalogued before this date")
	limit := fs.Int("limit", 50, "packages per page (at most 500)")
	after := fs.String("after", "", "continue after a previous page (the cursor it printed)")
	jsonOut := fs.Bool("json", false, "print one JSON object (hits and the next cursor)")
	query, rc := parseSearchArgs(fs, args)
	if rc >= 0 {
		return rc
	}
	q := store.SearchQuery{Text: query, Format: strings.ToLower(*format), Source: tg.ChatID(*source), Limit: *limit, Cursor: *after}
	var err error
	if q.MinSize, err = web.ParseSize(*minSize); err == nil {
		if q.MaxSize, err = web.ParseSize(*maxSize); err == nil {
			if q.Since, err = parseWhen(*since); err == nil {
				q.Until, err = parseWhen(*until)
			}
		}
	}
	if err == nil {
		err = db.check()
	}
	if err != nil {
		fmt.Fprintf(stderr, "stashd search: %v\n", err)
		return 2
	}

	st, closeStore, err := openReadOnly(ctx, db)
	if err != nil {
		fmt.Fprintf(stderr, "stashd search: %v\n", err)
		return 1
	}
	defer closeStore()
	page, err := st.Search(ctx, q)
	if errors.Is(err, store.ErrBadCursor) {
		fmt.Fprintf(stderr, "stashd search: --after %q is not a cursor this command printed\n", *after)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "stashd search: %v\n", err)
		return 1
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(searchJSON(page))
		return 0
	}
	printSearch(stdout, page)
	return 0
}

// parseSearchArgs takes QUERY before, after or between the flags.
func parseSearchArgs(fs *flag.FlagSet, args []string) (string, int) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return "", 0
			}
			return "", 2
		}
		if fs.NArg() == 0 {
			break
		}
		words = append(words, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(words) > 1 {
		fmt.Fprintf(fs.Output(), "stashd search: one QUERY, got %d words (quote it: stashd search \"%s\")\n", len(words), strings.Join(words, " "))
		return "", 2
	}
	if len(words) == 0 {
		return "", -1
	}
	return words[0], -1
}

func parseWhen(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, time.Local); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a date (2006-01-02) or an RFC 3339 time", s)
	}
	return t, nil
}

// openReadOnly opens the catalogue the flags name for reading only.
func openReadOnly(ctx context.Context, f storeFlags) (*store.Store, func(), error) {
	dbURL, _, stopDB, err := database(ctx, *f.url, *f.dataDir, newLogger(os.Stderr, slog.LevelError))
	if err != nil {
		return nil, nil, err
	}
	if *f.database != "" {
		if dbURL, err = withDatabase(dbURL, *f.database); err != nil {
			stopDB()
			return nil, nil, err
		}
	}
	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 2, ReadOnly: true})
	if err != nil {
		stopDB()
		return nil, nil, err
	}
	return st, func() { st.Close(); stopDB() }, nil
}

func printSearch(w io.Writer, page store.SearchPage) {
	if len(page.Hits) == 0 {
		if page.Next == "" {
			fmt.Fprintln(w, "no package matches")
			return
		}
		// A text of one or two characters has no trigram to look up: each
		// page reads a bounded stretch of the catalogue, and this one
		// found nothing there.
		fmt.Fprintln(w, "no package matches among those read so far (a query under 3 characters reads the catalogue a stretch per page)")
		fmt.Fprintf(w, "more: --after %s\n", page.Next)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PACKAGE\tMATCHING FILE\tSIZE\tSOURCE\tCATALOGUED")
	for _, h := range page.Hits {
		p := h.Package
		file := "(name)"
		if h.File != "" {
			file = web.Printable(h.File) + " (" + web.FormatSize(h.FileSize) + ")"
			if h.Files > 1 {
				file += fmt.Sprintf(" +%d", h.Files-1)
			}
		}
		fmt.Fprintf(tw, "%d %s\t%s\t%s\t%d/%d\t%s\n", p.ID, web.Printable(p.Name), file, web.FormatSize(p.TotalSize),
			p.Origin.Chat, p.Origin.Message.ServerID(), h.Created.Local().Format("2006-01-02 15:04"))
		if l := tg.MessageLink(p.Origin.Chat, p.Origin.Message, p.OriginTopic); l != "" {
			fmt.Fprintf(tw, "\t  origin %s\t\t\t\n", l)
		}
		for _, d := range h.Deliveries {
			if l := tg.MessageLink(d.Chat, d.Message, 0); l != "" {
				fmt.Fprintf(tw, "\t  copy (part %d) %s\t\t\t\n", d.Part+1, l)
			}
		}
	}
	tw.Flush()
	if page.Next != "" {
		fmt.Fprintf(w, "more: --after %s\n", page.Next)
	}
}

// searchHitJSON is one hit of `stashd search --json`.
type searchHitJSON struct {
	ID            int64      `json:"package_id"`
	Name          string     `json:"name"`
	Format        string     `json:"format"`
	Size          int64      `json:"size"`
	Parts         int        `json:"parts"`
	Rank          int        `json:"rank"`
	File          string     `json:"file,omitempty"`
	FileSize      int64      `json:"file_size,omitempty"`
	MatchingFiles int        `json:"matching_files"`
	CataloguedAt  time.Time  `json:"catalogued_at"`
	Origin        linkJSON   `json:"origin"`
	Copies        []copyJSON `json:"copies"`
}

type linkJSON struct {
	Chat    int64  `json:"chat_id"`
	Message int64  `json:"message_id"` // server id
	Link    string `json:"link,omitempty"`
}

type copyJSON struct {
	linkJSON
	Part int `json:"part"` // from 1
}

func searchJSON(page store.SearchPage) any {
	hits := []searchHitJSON{}
	for _, h := range page.Hits {
		p := h.Package
		j := searchHitJSON{ID: p.ID, Name: p.Name, Format: p.Format, Size: p.TotalSize, Parts: p.PartCount, Rank: h.Rank,
			File: h.File, FileSize: h.FileSize, MatchingFiles: h.Files, CataloguedAt: h.Created,
			Origin: linkJSON{Chat: int64(p.Origin.Chat), Message: p.Origin.Message.ServerID(),
				Link: tg.MessageLink(p.Origin.Chat, p.Origin.Message, p.OriginTopic)},
			Copies: []copyJSON{}}
		for _, d := range h.Deliveries {
			j.Copies = append(j.Copies, copyJSON{Part: d.Part + 1, linkJSON: linkJSON{Chat: int64(d.Chat),
				Message: d.Message.ServerID(), Link: tg.MessageLink(d.Chat, d.Message, 0)}})
		}
		hits = append(hits, j)
	}
	return struct {
		Hits []searchHitJSON `json:"hits"`
		Next string          `json:"next,omitempty"`
	}{hits, page.Next}
}
