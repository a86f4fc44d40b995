package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
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
	query, rc := parseSearchArgs(fs, args, stderr)
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

	if err := db.check(); err != nil {
		fmt.Fprintf(stderr, "stashd search: %v\n", err)
		return 2
	}
	st, closeStore, err := db.openReadOnly(ctx)
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
	printSearch(stdout, query, page)
	return 0
}

// parseSearchArgs takes QUERY before, after or between the flags.
func parseSearchArgs(fs *flag.FlagSet, args []string, stderr io.Writer) (string, int) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				printHelp(fs)
				return "", 0
			}
			fmt.Fprintf(stderr, "stashd search: %s (see stashd search --help)\n", flagError(err))
			return "", 2
		}
		if fs.NArg() == 0 {
			break
		}
		words = append(words, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(words) > 1 {
		fmt.Fprintf(stderr, "stashd search: one QUERY, got %d words (quote it: stashd search \"%s\")\n", len(words), strings.Join(words, " "))
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

// printSearch prints a page as one aligned row per package — id, name,
// the matching entry (the package's name, or the file inside it that
// matched), size, source message and when it was catalogued — then the
// t.me links of each package, its links to other packages (repack of,
// repacked as, contained in, contains), and an explicit line when nothing
// matched.
func printSearch(w io.Writer, query string, page store.SearchPage) {
	if len(page.Hits) == 0 {
		if page.Next == "" {
			if query == "" {
				fmt.Fprintln(w, "no results: the catalogue holds no package that passes the filters")
			} else {
				fmt.Fprintf(w, "no results for %q\n", web.Printable(query))
			}
			return
		}
		// A text of one or two characters has no trigram to look up: each
		// page reads a bounded stretch of the catalogue, and this one
		// found nothing there.
		fmt.Fprintln(w, "no results among the packages read so far (a query under 3 characters reads the catalogue a stretch per page)")
		fmt.Fprintf(w, "more: --after %s\n", page.Next)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPACKAGE\tMATCHING ENTRY\tSIZE\tSOURCE\tCATALOGUED")
	for _, h := range page.Hits {
		p := h.Package
		entry := "(the name)"
		if h.File != "" {
			entry = web.Printable(h.File) + " (" + web.FormatSize(h.FileSize) + ")"
			if h.Files > 1 {
				entry += fmt.Sprintf(" +%d more", h.Files-1)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\n", p.ID, web.Printable(p.Name), entry, web.FormatSize(p.TotalSize),
			p.Origin.Chat, p.Origin.Message.ServerID(), h.Created.Local().Format("2006-01-02 15:04"))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, h := range page.Hits {
		p := h.Package
		if l := tg.MessageLink(p.Origin.Chat, p.Origin.Message, p.OriginTopic); l != "" {
			fmt.Fprintf(w, "%d origin %s\n", p.ID, l)
		}
		for _, d := range h.Deliveries {
			if l := tg.MessageLink(d.Chat, d.Message, 0); l != "" {
				fmt.Fprintf(w, "%d copy (part %d) %s\n", p.ID, d.Part+1, l)
			}
		}
		for _, l := range h.Links {
			fmt.Fprintf(w, "%d %s %d %s\n", p.ID, l.Relation, l.Other, web.Printable(l.OtherName))
		}
	}
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
