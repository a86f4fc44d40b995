package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// postedState is what stashd made of one posted file, read from the
// catalogue and the destinations.
type postedState struct {
	outcome     string
	pkg         int64
	nameFlags   []string
	deadLetter  string
	rejected    string
	delivered   int // destinations holding the file
	format      string
	detected    string
	nameLied    bool
	suspicious  []string
	entryFlags  []string
	entryUnsafe bool
	links       map[int64]string // other package → kind, either way
	// firstOfPair: the package is the one a repack pair's other package
	// is linked to (it was catalogued first), so it is the one delivered.
	firstOfPair bool
	// twinDuplicate: another message of the same bytes was recorded as the
	// duplicate of this one's package. Two copies handled side by side
	// race for the package: either may be catalogued first.
	twinDuplicate bool
}

// judgePostDir judges every file posted from a directory with a manifest
// against its expectation, filling PostDirFiles, PostDirWrong and one line
// per wrong file in PostDirWrongNames.
func (c *checker) judgePostDir(ctx context.Context, rep *Report) error {
	files := c.t.PostedFiles
	if len(files) == 0 {
		return nil
	}
	dead, err := deadLetterReasons(ctx, c.st)
	if err != nil {
		return err
	}
	inDest := map[string]int{}
	for _, d := range c.t.Destinations {
		seen := map[string]bool{}
		for _, doc := range d.Docs {
			if !seen[doc.File] {
				seen[doc.File] = true
				inDest[doc.File]++
			}
		}
	}
	states := make([]postedState, len(files))
	pkgOf := map[string]int64{} // file name → its package
	for i, f := range files {
		s, err := c.postedState(ctx, f.Message)
		if err != nil {
			return err
		}
		s.deadLetter = dead[f.Message]
		s.delivered = inDest[f.UniqueID]
		states[i] = s
		pkgOf[f.Name] = s.pkg
	}
	// A set's dead letter may sit on any of its parts.
	setDead := map[string]string{}
	for i, f := range files {
		if f.Expect != nil && f.Expect.Set != "" && states[i].deadLetter != "" {
			setDead[f.Expect.Set] += states[i].deadLetter + "; "
		}
	}

	// A repack pair's content is delivered once, by whichever of the two
	// was catalogued first.
	deliveredAs := map[string]bool{}
	for i, f := range files {
		if f.Expect != nil && f.Expect.RepackOf != "" && states[i].delivered > 0 {
			deliveredAs[f.Expect.RepackOf] = true
		}
	}
	group := repackGroups(states)
	rep.PostDirFiles = len(files)
	for i, f := range files {
		var why []string
		if f.Expect == nil {
			why = append(why, "not in "+tgsim.ManifestName)
		} else {
			st := states[i]
			if f.Expect.Expect == tgsim.ExpectDelivered && st.delivered == 0 && deliveredAs[f.Name] && hasRepackLink(st.links) {
				st.delivered = len(c.t.Destinations) // delivered as its repack, linked
			}
			why = judgeFile(*f.Expect, st, len(c.t.Destinations), setDead[f.Expect.Set], pkgOf, group)
		}
		if len(why) > 0 {
			rep.PostDirWrong++
			exp := "?"
			if f.Expect != nil {
				exp = f.Expect.Expect
			}
			rep.PostDirWrongNames = append(rep.PostDirWrongNames,
				fmt.Sprintf("%q (posted as %q): expected %s: %s", f.Name, f.PostedAs, exp, strings.Join(why, "; ")))
		}
	}
	return nil
}

// judgeFile returns what is wrong with one file's fate, nothing when it
// is as expected.
//
// group maps a package to its repack group (repackGroups): a repack may be
// linked to another repack of the same content catalogued before the file
// it names (plain.rar to plain.7z, both repacks of plain.zip).
func judgeFile(e tgsim.Expectation, s postedState, dests int, setDead string, pkgOf map[string]int64, group map[int64]int64) []string {
	var why []string
	wrong := func(format string, args ...any) { why = append(why, fmt.Sprintf(format, args...)) }
	notDelivered := func() {
		if s.delivered > 0 {
			wrong("delivered to %d destinations", s.delivered)
		}
	}
	switch e.Expect {
	case tgsim.ExpectDelivered:
		if s.delivered < dests {
			wrong("in %d of %d destinations (outcome %q%s)", s.delivered, dests, s.outcome, deadNote(s.deadLetter))
		}
	case tgsim.ExpectDeadLetter:
		notDelivered()
		reasons := s.deadLetter + "; " + setDead
		if s.deadLetter == "" && setDead == "" {
			wrong("no dead letter (outcome %q)", s.outcome)
		} else if !strings.Contains(reasons, e.Reason) {
			wrong("dead letter %q does not say %q", strings.TrimSuffix(reasons, "; "), e.Reason)
		}
	case tgsim.ExpectNotArchive:
		notDelivered()
		if s.outcome != string(store.OutcomeNotArchive) {
			wrong("outcome %q, want not_archive%s", s.outcome, deadNote(s.deadLetter))
		}
	case tgsim.ExpectRejected:
		notDelivered()
		if s.rejected == "" {
			wrong("no rejected copy recorded (outcome %q%s)", s.outcome, deadNote(s.deadLetter))
		}
	case tgsim.ExpectDuplicate:
		if s.outcome == string(store.OutcomePackage) && s.twinDuplicate {
			break // catalogued before its twin, which became the duplicate
		}
		notDelivered()
		if s.outcome != string(store.OutcomeDuplicate) {
			wrong("outcome %q, want duplicate", s.outcome)
		}
	case tgsim.ExpectRepack:
		if s.delivered > 0 && !s.firstOfPair {
			wrong("delivered to %d destinations", s.delivered)
		}
		other := pkgOf[e.RepackOf]
		sameGroup := other != 0 && s.pkg != 0 && group[s.pkg] != 0 && group[s.pkg] == group[other]
		if other == 0 || s.links[other] != "repack" && !sameGroup {
			wrong("not linked as a repack of %q (outcome %q)", e.RepackOf, s.outcome)
		}
	}
	if e.Format != "" && s.pkg != 0 && s.format != e.Format && s.detected != e.Format {
		wrong("catalogued as %q, want %q", s.format, e.Format)
	} else if e.Format != "" && s.pkg == 0 && e.Expect == tgsim.ExpectDelivered {
		wrong("not catalogued")
	}
	if e.ContainedIn != "" {
		if other := pkgOf[e.ContainedIn]; other == 0 || s.links[other] != "contained_in" {
			wrong("not shown as contained in %q", e.ContainedIn)
		}
	}
	for _, flag := range e.Flags {
		if !hasFlag(s, flag) {
			wrong("not flagged %s", flag)
		}
	}
	// A valid archive flagged suspicious is as wrong as a lie let through.
	if e.Expect == tgsim.ExpectDelivered && len(s.suspicious) > 0 && !slices.Contains(e.Flags, "suspicious") {
		wrong("flagged suspicious: %q", s.suspicious)
	}
	return why
}

// repackGroups joins packages linked as repacks, either way, and maps
// each package in a group to one of its members; packages linked to none
// are left out.
func repackGroups(states []postedState) map[int64]int64 {
	parent := map[int64]int64{}
	var find func(x int64) int64
	find = func(x int64) int64 {
		if p, ok := parent[x]; ok && p != x {
			parent[x] = find(p)
			return parent[x]
		}
		parent[x] = x
		return x
	}
	for _, s := range states {
		for other, kind := range s.links {
			if kind == "repack" && s.pkg != 0 {
				parent[find(s.pkg)] = find(other)
			}
		}
	}
	out := map[int64]int64{}
	for x := range parent {
		out[x] = find(x)
	}
	return out
}

func deadNote(reason string) string {
	if reason == "" {
		return ""
	}
	return ", dead letter " + fmt.Sprintf("%q", reason)
}

// hasFlag reports whether the catalogue shows flag for the file.
func hasFlag(s postedState, flag string) bool {
	switch {
	case strings.HasPrefix(flag, "name:"):
		return slices.Contains(s.nameFlags, strings.TrimPrefix(flag, "name:"))
	case flag == "entry:unsafe":
		return s.entryUnsafe
	case strings.HasPrefix(flag, "entry:"):
		return slices.Contains(s.entryFlags, strings.TrimPrefix(flag, "entry:"))
	case flag == "suspicious":
		return len(s.suspicious) > 0
	case flag == "name_lied":
		return s.nameLied
	}
	return false
}

// postedState reads what the catalogue says of the message key.
func (c *checker) postedState(ctx context.Context, key tg.MessageKey) (postedState, error) {
	var s postedState
	var pkg *int64
	err := c.st.Pool().QueryRow(ctx, `SELECT outcome, package_id, name_flags FROM source_messages
		WHERE chat_id = $1 AND message_id = $2`, key.Chat, key.Message).Scan(&s.outcome, &pkg, &s.nameFlags)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("read message %v: %w", key, err)
	}
	if err := c.st.Pool().QueryRow(ctx, `SELECT coalesce((SELECT reason FROM rejected_parts
		WHERE chat_id = $1 AND message_id = $2), '')`, key.Chat, key.Message).Scan(&s.rejected); err != nil {
		return s, fmt.Errorf("read rejected part %v: %w", key, err)
	}
	if pkg == nil || s.outcome == string(store.OutcomeDuplicate) {
		// A message recorded without its package (a set's later part), or
		// as a copy of another (a repack linked with repacks = "link"):
		// the package holding the message as a part.
		var id int64
		err := c.st.Pool().QueryRow(ctx, `SELECT package_id FROM package_parts
			WHERE source_chat_id = $1 AND source_message_id = $2 LIMIT 1`, key.Chat, key.Message).Scan(&id)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return s, fmt.Errorf("read part %v: %w", key, err)
		}
		if id != 0 {
			pkg = &id
		}
	}
	if pkg == nil {
		return s, nil
	}
	s.pkg = *pkg
	err = c.st.Pool().QueryRow(ctx, `SELECT format, detected_format, name_lied, suspicious,
		coalesce((SELECT array_agg(DISTINCT f) FROM package_files, unnest(flags) f WHERE package_id = p.id), '{}'),
		EXISTS (SELECT 1 FROM package_files WHERE package_id = p.id AND unsafe)
		FROM packages p WHERE id = $1`, s.pkg).Scan(&s.format, &s.detected, &s.nameLied, &s.suspicious, &s.entryFlags, &s.entryUnsafe)
	if err != nil {
		return s, fmt.Errorf("read package %d: %w", s.pkg, err)
	}
	// Links either way: a repack catalogued before the package it repacks
	// is the first, and the package is linked to it.
	rows, err := c.st.Pool().Query(ctx, `SELECT other_id, kind FROM package_links WHERE package_id = $1
		UNION SELECT package_id, kind FROM package_links WHERE other_id = $1`, s.pkg)
	if err != nil {
		return s, fmt.Errorf("read links of %d: %w", s.pkg, err)
	}
	defer rows.Close()
	s.links = map[int64]string{}
	if err := c.st.Pool().QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM package_links WHERE other_id = $1 AND kind = 'repack'),
		EXISTS (SELECT 1 FROM source_messages WHERE package_id = $1 AND outcome = $2 AND (chat_id, message_id) <> ($3, $4))`,
		s.pkg, string(store.OutcomeDuplicate), key.Chat, key.Message).Scan(&s.firstOfPair, &s.twinDuplicate); err != nil {
		return s, fmt.Errorf("read links to and duplicates of %d: %w", s.pkg, err)
	}
	for rows.Next() {
		var other int64
		var kind string
		if err := rows.Scan(&other, &kind); err != nil {
			return s, err
		}
		s.links[other] = kind
	}
	return s, rows.Err()
}

// repackState says, for each package the world repacked, which of its
// repacks' contents were delivered in its place: a repack processed
// before the package it repacks is catalogued first, so the package is
// linked to it (the first in the catalogue) and the repack is the one
// delivered. Either way the content is delivered once.
type repackState struct {
	// linked holds the hashes of repacks linked, either way, to the
	// package they repack.
	linked map[Hash]bool
	// deliveredInstead holds packages not delivered whose repack was.
	deliveredInstead map[Hash]bool
}

// judgeRepacks counts the world's repacks, those linked (either way) to
// the package they repack, and those whose content was delivered twice.
func (c *checker) judgeRepacks(ctx context.Context, rep *Report, fullyDelivered func(Package) bool) (repackState, error) {
	st := repackState{linked: map[Hash]bool{}, deliveredInstead: map[Hash]bool{}}
	inDest := map[string]int{}
	for _, d := range c.t.Destinations {
		for _, doc := range d.Docs {
			inDest[doc.File]++
		}
	}
	seen := map[Hash]bool{}
	for _, p := range c.t.Packages {
		if !p.Repack || seen[p.Hash] {
			continue
		}
		seen[p.Hash] = true
		rep.RepacksPublished++
		var linked, checked bool
		// Linked as a repack (either way) of the package it repacks, or of
		// another copy of that content catalogued before it (a zip stored
		// again, itself linked to the first): the content is one group.
		// checked: the package it repacks had its CRCs checked against its
		// bytes; a repack of one whose CRCs are a claim (a RAR's, a 7z's)
		// is delivered by design, since a fake could copy the claim.
		err := c.st.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM packages a JOIN package_links l
			ON (l.package_id = a.id OR l.other_id = a.id) AND l.kind = 'repack'
			JOIN packages b ON b.content_hash = $2
			WHERE a.content_hash = $1 AND a.content_sig IS NOT NULL AND a.content_sig = b.content_sig),
			coalesce((SELECT sig_checked FROM packages WHERE content_hash = $2), false)`,
			p.Hash[:], p.RepackOf[:]).Scan(&linked, &checked)
		if err != nil {
			return st, fmt.Errorf("read repack links: %w", err)
		}
		if linked {
			rep.RepacksDetected++
			st.linked[p.Hash] = true
		}
		if fullyDelivered(p) && inDest[p.Parts[0].File] > 0 {
			var orig Package
			for _, q := range c.t.Packages {
				if q.Hash == p.RepackOf {
					orig = q
					break
				}
			}
			switch {
			case fullyDelivered(orig) && checked:
				rep.RepacksDelivered++ // the same content twice
				rep.RepackDeliveredNames = append(rep.RepackDeliveredNames, fmt.Sprintf("%s (a repack of %s)", p.Name, orig.Name))
			case !fullyDelivered(orig) && linked:
				st.deliveredInstead[p.RepackOf] = true
			}
		}
	}
	return st, nil
}

func hasRepackLink(links map[int64]string) bool {
	for _, k := range links {
		if k == "repack" {
			return true
		}
	}
	return false
}
