package route

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"stashd/archive"
	"stashd/tg"
)

// Source is a route's source: a chat, optionally limited to some forum
// topics.
type Source struct {
	Chat tg.ChatID
	// Topics limits the source to these forum topics (thread ids); empty
	// means every message of the chat.
	Topics []int64
}

// Route sends the packages of its sources that pass its filter to its
// destinations.
type Route struct {
	// Name labels the route in errors and status; "" shows as its index.
	Name         string
	Sources      []Source
	Destinations []tg.ChatID
	// Topics, when not empty, holds the forum topic each destination
	// receives the route's packages in, index for index with Destinations
	// (a shorter list leaves the rest without a topic).
	Topics []Topic
	Filter Filter
	// Window, when set, holds the route's deliveries outside its daily
	// hours; nil delivers at any time.
	Window *Window
}

// Topic is the forum topic of a destination forum that a route delivers
// into. The zero Topic is none: the chat itself (in a forum, its General
// topic).
type Topic struct {
	// Thread is a fixed topic's thread id.
	Thread int64
	// Same delivers each package into the destination's topic named like
	// the package's source topic, created the first time; a package from
	// outside any topic goes to the General topic.
	Same bool
}

// IsZero reports whether t names no topic.
func (t Topic) IsZero() bool { return t.Thread == 0 && !t.Same }

// String shows t as the configuration writes it.
func (t Topic) String() string {
	switch {
	case t.Same:
		return `"same"`
	case t.Thread != 0:
		return fmt.Sprint(t.Thread)
	}
	return "none"
}

// DestinationTopic returns the topic of r's i-th destination.
func (r Route) DestinationTopic(i int) Topic {
	if i < len(r.Topics) {
		return r.Topics[i]
	}
	return Topic{}
}

// Filter selects packages. The zero Filter passes everything.
type Filter struct {
	// Formats are archive formats ("zip", "rar", "7z", "tar", "tar.gz",
	// ...), as the name of the package's first part gives them; empty
	// means any format.
	Formats []string
	// Include: when not empty, the package name must match one of these.
	Include []Pattern
	// Exclude: the package name must match none of these.
	Exclude []Pattern
	// MinSize and MaxSize bound the package's total size in bytes; zero
	// means no bound.
	MinSize, MaxSize int64
}

// Pattern matches a package name: a glob (path.Match syntax, compared
// without regard to case) or, written "re:<expression>", a regular
// expression (Go syntax; matched anywhere in the name unless anchored).
type Pattern struct {
	text string
	re   *regexp.Regexp
}

// ParsePattern reads a glob or an "re:" regular expression.
func ParsePattern(s string) (Pattern, error) {
	if expr, ok := strings.CutPrefix(s, "re:"); ok {
		re, err := regexp.Compile(expr)
		if err != nil {
			return Pattern{}, fmt.Errorf("bad regular expression %q: %w", expr, err)
		}
		return Pattern{text: s, re: re}, nil
	}
	if s == "" {
		return Pattern{}, fmt.Errorf("empty pattern")
	}
	if _, err := path.Match(strings.ToLower(s), ""); err != nil {
		return Pattern{}, fmt.Errorf("bad glob %q: %w", s, err)
	}
	return Pattern{text: s}, nil
}

// MustPattern is ParsePattern for patterns known to be valid (tests).
func MustPattern(s string) Pattern {
	p, err := ParsePattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.text }

// Match reports whether name matches.
func (p Pattern) Match(name string) bool {
	if p.re != nil {
		return p.re.MatchString(name)
	}
	ok, _ := path.Match(strings.ToLower(p.text), strings.ToLower(name))
	return ok
}

// Formats lists the archive formats a Filter may name.
var Formats = []string{
	string(archive.FormatZip), string(archive.FormatRar), string(archive.Format7z), string(archive.FormatTar),
	string(archive.FormatTarGz), string(archive.FormatTarBz2), string(archive.FormatTarXz), string(archive.FormatTarZst),
}

// Package is what routing knows of a package as one source posted it.
type Package struct {
	Chat tg.ChatID
	// Topic is the forum topic (thread id) of its first part; 0 outside
	// forums.
	Topic int64
	// Name is the file name of its first part, in set order.
	Name string
	// Size is the total size of its parts in bytes.
	Size int64
}

// Format is the archive format p's name gives.
func (p Package) Format() string { return string(archive.ParseName(p.Name).Format) }

// Pass reports whether p passes f.
func (f Filter) Pass(p Package) bool {
	if len(f.Formats) > 0 && !slices.Contains(f.Formats, p.Format()) {
		return false
	}
	if f.MinSize > 0 && p.Size < f.MinSize {
		return false
	}
	if f.MaxSize > 0 && p.Size > f.MaxSize {
		return false
	}
	if len(f.Include) > 0 && !slices.ContainsFunc(f.Include, func(pt Pattern) bool { return pt.Match(p.Name) }) {
		return false
	}
	return !slices.ContainsFunc(f.Exclude, func(pt Pattern) bool { return pt.Match(p.Name) })
}

// Matches reports whether r sends p: p comes from one of r's sources (and
// topics) and passes r's filter.
func (r Route) Matches(p Package) bool {
	from := slices.ContainsFunc(r.Sources, func(s Source) bool {
		return s.Chat == p.Chat && (len(s.Topics) == 0 || slices.Contains(s.Topics, p.Topic))
	})
	return from && r.Filter.Pass(p)
}

// Table is the routing of one daemon. A nil or empty Table (no routes)
// sends everything to its destinations. It is immutable and safe for
// concurrent use.
type Table struct {
	all    []tg.ChatID
	routes []Route
}

// NewTable returns the table of routes; with none, every package goes to
// every one of all.
func NewTable(all []tg.ChatID, routes []Route) *Table {
	return &Table{all: slices.Clone(all), routes: slices.Clone(routes)}
}

// Routed reports whether routes decide (false: everything goes everywhere).
func (t *Table) Routed() bool { return t != nil && len(t.routes) > 0 }

// HasWindows reports whether some route has a delivery window.
func (t *Table) HasWindows() bool {
	return t.Routed() && slices.ContainsFunc(t.routes, func(r Route) bool { return r.Window != nil })
}

// Routes returns the routes.
func (t *Table) Routes() []Route {
	if t == nil {
		return nil
	}
	return slices.Clone(t.routes)
}

// Destinations returns where p goes: each destination once, in the order
// routes name them, however many routes match.
func (t *Table) Destinations(p Package) []tg.ChatID {
	if t == nil {
		return nil
	}
	if !t.Routed() {
		return slices.Clone(t.all)
	}
	var out []tg.ChatID
	for _, r := range t.routes {
		if !r.Matches(p) {
			continue
		}
		for _, d := range r.Destinations {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// Topic returns the forum topic of dest that p goes to: the topic of the
// first route (in configuration order) that sends p to dest. A package
// goes once per destination, so routes that disagree do not make copies.
func (t *Table) Topic(p Package, dest tg.ChatID) Topic {
	if !t.Routed() {
		return Topic{}
	}
	for _, r := range t.routes {
		if !r.Matches(p) {
			continue
		}
		if i := slices.Index(r.Destinations, dest); i >= 0 {
			return r.DestinationTopic(i)
		}
	}
	return Topic{}
}

// Gate says whether p may be delivered to dest at now: open when some
// route sending p there has no window or an open one. When closed,
// opensAt is the earliest time one of those windows opens and route
// names it.
func (t *Table) Gate(p Package, dest tg.ChatID, now time.Time) (open bool, opensAt time.Time, route string) {
	if !t.Routed() {
		return true, now, ""
	}
	for i, r := range t.routes {
		if !slices.Contains(r.Destinations, dest) || !r.Matches(p) {
			continue
		}
		if r.Window == nil || r.Window.Open(now) {
			return true, now, r.Title(i)
		}
		if at := r.Window.NextOpen(now); opensAt.IsZero() || at.Before(opensAt) {
			opensAt, route = at, r.Title(i)
		}
	}
	return opensAt.IsZero(), opensAt, route
}

// AllDestinations returns every destination some package may go to.
func (t *Table) AllDestinations() []tg.ChatID {
	if t == nil {
		return nil
	}
	if !t.Routed() {
		return slices.Clone(t.all)
	}
	var out []tg.ChatID
	for _, r := range t.routes {
		for _, d := range r.Destinations {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// Title is route i's name, or "routes[i]" when it has none: how metrics,
// status and the store name it.
func (r Route) Title(i int) string {
	if r.Name != "" {
		return r.Name
	}
	return fmt.Sprintf("routes[%d]", i)
}

// Label names route i for people: its name, or "routes[i]".
func (r Route) Label(i int) string {
	if r.Name != "" {
		return fmt.Sprintf("route %q", r.Name)
	}
	return fmt.Sprintf("routes[%d]", i)
}

// Check validates routes against what the daemon found at start: watched
// reports whether an account watches a chat as a source, and lookup
// returns a chat's kind and whether any account knows it. It returns every
// problem, one line each (errors.Join), or nil.
func Check(routes []Route, watched func(tg.ChatID) bool, lookup func(tg.ChatID) (tg.ChatKind, bool)) error {
	var errs []error
	for i, r := range routes {
		for _, s := range r.Sources {
			kind, known := lookup(s.Chat)
			switch {
			case !watched(s.Chat):
				errs = append(errs, fmt.Errorf("%s: source %d: unknown chat (no account watches it; add it to an account's sources)", r.Label(i), s.Chat))
			case len(s.Topics) > 0 && known && kind != tg.KindForum:
				errs = append(errs, fmt.Errorf("%s: source %d has topics %v but is a %s, not a forum", r.Label(i), s.Chat, s.Topics, kind))
			}
		}
		forumSource := slices.ContainsFunc(r.Sources, func(s Source) bool {
			kind, known := lookup(s.Chat)
			return len(s.Topics) > 0 || known && kind == tg.KindForum
		})
		for j, d := range r.Destinations {
			kind, known := lookup(d)
			if !known {
				errs = append(errs, fmt.Errorf("%s: destination %d: unknown chat (no account can see it)", r.Label(i), d))
			}
			switch topic := r.DestinationTopic(j); {
			case topic.IsZero():
			case known && kind != tg.KindForum:
				errs = append(errs, fmt.Errorf("%s: destination %d has topic %s but is a %s, not a forum", r.Label(i), d, topic, kind))
			case topic.Same && !forumSource:
				errs = append(errs, fmt.Errorf("%s: destination %d has topic \"same\" but none of the route's sources is a forum: there is no source topic to name it after", r.Label(i), d))
			}
			if watched(d) {
				errs = append(errs, fmt.Errorf("%s: destination %d is also a source: stashd would mirror its own deliveries", r.Label(i), d))
			}
		}
	}
	return errors.Join(errs...)
}

// Key fingerprints what r sends where (sources, topics, destinations,
// filter), not its name: an edited route is a new route, and its
// packages already catalogued are walked again (deliveries are recorded
// per package and destination, so nothing goes twice).
func (r Route) Key() string {
	var b strings.Builder
	srcs := make([]string, len(r.Sources))
	for i, s := range r.Sources {
		topics := slices.Clone(s.Topics)
		slices.Sort(topics)
		srcs[i] = fmt.Sprintf("%d%v", s.Chat, topics)
	}
	slices.Sort(srcs)
	dests := slices.Clone(r.Destinations)
	slices.Sort(dests)
	formats := slices.Clone(r.Filter.Formats)
	slices.Sort(formats)
	pats := func(ps []Pattern) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.text
		}
		slices.Sort(out)
		return out
	}
	// The window is left out: a route given hours is not a new route, its
	// backlog only waits.
	fmt.Fprintf(&b, "s=%q d=%v f=%q i=%q x=%q min=%d max=%d", srcs, dests, formats,
		pats(r.Filter.Include), pats(r.Filter.Exclude), r.Filter.MinSize, r.Filter.MaxSize)
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:12])
}
