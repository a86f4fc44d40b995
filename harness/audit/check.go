package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/ingest"
	"stashd/store"
	"stashd/tg"
)

// partRef names one part of one published package.
type partRef struct {
	hash Hash
	idx  int
}

// Check compares the world's Truth with the catalogue in st and the
// destinations:
//   - every distinct complete package is catalogued and every one of its
//     parts is in every destination (else it is missing);
//   - no part of a package is in a destination twice;
//   - corrupt archives are catalogued with a listing error;
//   - incomplete sets are dead letters with a reason and were never
//     delivered;
//   - every package whose send vanished (updateDeleteMessages) was
//     delivered later or is a dead letter with its reason;
//   - a package published only in sources that lost access (recorded so
//     in the catalogue) or that protect their content (a dead letter says
//     so) is explained rather than missing;
//   - no account ever ran in two sessions at once (Truth.SessionOverlaps);
//   - no account made a request inside a flood wait it was asked for
//     (Truth.FloodWaitBreaches).
//
// Settled and the run's own figures are left to the caller.
func Check(ctx context.Context, st *store.Store, t Truth) (Report, error) {
	c := checker{st: st, t: t, lost: set(t.Lost), protected: set(t.Protected), mode: ModeFull}
	return c.check(ctx)
}

// CheckCatalogue is Check for a mirror whose deliveries back up (a send
// budget below the publishing rate): every package must be catalogued and
// nothing delivered twice, but deliveries may still wait; the report counts
// them (DeliveryBacklog).
func CheckCatalogue(ctx context.Context, st *store.Store, t Truth) (Report, error) {
	c := checker{st: st, t: t, lost: set(t.Lost), protected: set(t.Protected), mode: ModeCatalogue}
	return c.check(ctx)
}

func set(chats []tg.ChatID) map[tg.ChatID]bool {
	out := make(map[tg.ChatID]bool, len(chats))
	for _, c := range chats {
		out[c] = true
	}
	return out
}

// maxOverlapNames bounds Report.SessionOverlapNames: the first few say
// what went wrong.
const maxOverlapNames = 10

type checker struct {
	st        *store.Store
	t         Truth
	lost      map[tg.ChatID]bool
	protected map[tg.ChatID]bool
	mode      string
}

func (c *checker) check(ctx context.Context) (Report, error) {
	unique := c.t.unique()
	rep := Report{Mode: c.mode, UniquePackages: len(unique), StalledDownloads: c.t.DownloadFaults, Calls: c.t.Calls,
		SessionOverlaps: c.t.SessionOverlaps, FloodWaitBreaches: c.t.FloodWaitBreaches}
	for _, o := range c.t.OverlapExamples[:min(len(c.t.OverlapExamples), maxOverlapNames)] {
		rep.SessionOverlapNames = append(rep.SessionOverlapNames, o.String())
	}
	for _, b := range c.t.BreachExamples[:min(len(c.t.BreachExamples), maxOverlapNames)] {
		rep.FloodWaitBreachNames = append(rep.FloodWaitBreachNames, b.String())
	}
	dead, err := deadLetterReasons(ctx, c.st)
	if err != nil {
		return rep, err
	}
	explained, err := c.faultExplained(ctx, dead, &rep)
	if err != nil {
		return rep, err
	}
	if err := c.judgePostDir(ctx, &rep); err != nil {
		return rep, err
	}

	// Which file (unique id) carries which part: from the sources as they
	// are now, so the audit reads the world rather than trusting stashd.
	carries := map[string]partRef{}
	for _, p := range c.t.Packages {
		rep.PublishedArchives++
		for i, part := range p.Parts {
			if part.File != "" {
				carries[part.File] = partRef{p.Hash, i}
			}
		}
	}

	catalogue, err := c.st.PackageHashes(ctx)
	if err != nil {
		return rep, err
	}
	dests := c.t.Destinations
	seen := make([]map[partRef]int, len(dests))
	for i, d := range dests {
		seen[i] = map[partRef]int{}
		copies := map[partRef][]Doc{}
		for _, doc := range d.Docs {
			if ref, ok := carries[doc.File]; ok {
				seen[i][ref]++
				copies[ref] = append(copies[ref], doc)
			}
		}
		for ref, n := range seen[i] {
			if n > 1 {
				rep.DuplicateDeliveries += n - 1
				names, err := c.describeCopies(ctx, copies[ref])
				if err != nil {
					return rep, err
				}
				rep.DuplicateNames = append(rep.DuplicateNames, fmt.Sprintf("%s part %d in %d: %d copies (%s)",
					unique[ref.hash].Name, ref.idx, d.Chat, n, names))
			}
		}
	}
	sort.Strings(rep.DuplicateNames)

	for _, p := range unique {
		var size int64
		for _, part := range p.Parts {
			size += part.Size
		}
		rep.LargestPackage = max(rep.LargestPackage, size)
	}
	fullyDelivered := func(p Package) bool {
		for _, i := range c.required(p) {
			for part := range p.Parts {
				if seen[i][partRef{p.Hash, part}] == 0 {
					return false
				}
			}
		}
		return len(p.Parts) > 0
	}
	repacks, err := c.judgeRepacks(ctx, &rep, fullyDelivered)
	if err != nil {
		return rep, err
	}
	deliveredHash := map[Hash]bool{}
	for h, p := range unique {
		pkg, catalogued := catalogue[h]
		if catalogued {
			rep.CataloguedPackages++
		}
		delivered, missingPairs := true, 0
		for _, i := range c.required(p) {
			for part := range p.Parts {
				if seen[i][partRef{h, part}] == 0 {
					delivered = false
					missingPairs++
					break
				}
			}
		}
		deliveredHash[h] = delivered
		if delivered {
			rep.DeliveredPackages++
		}
		if catalogued && !repacks.deliveredInstead[h] {
			rep.DeliveryBacklog += missingPairs // a repack's content delivered as its repack owes nothing
		}
		if p.Corrupt && !catalogued && !delivered && deadBroken(p, dead) {
			// Verification failed and the package was dead-lettered with
			// the reason, as it must be unless deliver_broken is set.
			rep.Corrupt++
			rep.CorruptDeadLettered++
			continue
		}
		if !delivered && repacks.deliveredInstead[h] {
			// Linked as a repack of its own repack, catalogued first and
			// delivered: the content is in the destinations once.
			rep.DeliveredPackages++
			deliveredHash[h] = true
			continue
		}
		if !delivered {
			switch explained[h] {
			case explainedLost:
				rep.LostUndelivered++
				continue
			case explainedProtected:
				rep.ProtectedRecorded++
				continue
			}
		}
		if c.mode == ModeCatalogue {
			if !catalogued {
				rep.Missing++
				rep.MissingNames = append(rep.MissingNames, fmt.Sprintf("%s at %s not catalogued", p.Name, p.Parts[0].Key()))
			}
		} else if !catalogued || !delivered {
			rep.Missing += max(missingPairs, 1) // per required (package, destination) pair
			what := fmt.Sprintf("%s at %s (catalogued %v, delivered %v)", p.Name, p.Parts[0].Key(), catalogued, delivered)
			var rows string
			var err error
			if catalogued {
				rows, err = c.describeDeliveries(ctx, pkg.ID)
			} else {
				rows, err = c.describeParts(ctx, p.Parts)
			}
			if err != nil {
				return rep, err
			}
			what += ": " + rows
			rep.MissingNames = append(rep.MissingNames, what)
		}
		if p.Corrupt {
			rep.Corrupt++
			if catalogued && pkg.ListingError != "" {
				rep.CorruptListingErrors++
			}
		}
	}
	c.routeViolations(&rep, seen)
	c.topicViolations(&rep, carries)

	for _, p := range c.t.Packages {
		if !p.Incomplete || c.faulty(p) {
			continue
		}
		rep.IncompleteSets++
		all := len(p.Parts) > 0
		for _, part := range p.Parts {
			if !strings.Contains(dead[part.Key()], "incomplete set") {
				all = false
			}
		}
		if all {
			rep.IncompleteDeadLettered++
		} else {
			rep.MissingNames = append(rep.MissingNames, fmt.Sprintf("%s: incomplete set not a dead letter", p.Name))
		}
		for i := range dests {
			for part := range p.Parts {
				if seen[i][partRef{p.Hash, part}] > 0 {
					rep.IncompleteDelivered++
					rep.MissingNames = append(rep.MissingNames, fmt.Sprintf("%s: part %d of an incomplete set delivered", p.Name, part))
				}
			}
		}
	}
	sort.Strings(rep.MissingNames)
	rep.DeadLetters = len(dead)
	expected := map[tg.MessageKey]bool{}
	for _, p := range c.t.Packages {
		if p.Incomplete || p.Corrupt || p.Replaced || c.faulty(p) {
			for _, part := range p.Parts {
				expected[part.Key()] = true
			}
		}
	}
	c.judgeEdits(&rep, fullyDelivered)
	for k, reason := range dead {
		if !expected[k] {
			rep.OtherDeadLetters = append(rep.OtherDeadLetters, fmt.Sprintf("%s: %s", k, reason))
		}
	}
	sort.Strings(rep.OtherDeadLetters)
	if err := c.vanished(ctx, &rep, deliveredHash, dead); err != nil {
		return rep, err
	}
	if rep.CatalogueLagP99Seconds, err = c.catalogueLag(ctx, unique); err != nil {
		return rep, err
	}
	return rep, nil
}

// required returns the indices (into the destinations) where p belongs:
// every destination, or with routes those its publication is routed to.
func (c *checker) required(p Package) []int {
	var out []int
	for i, d := range c.t.Destinations {
		if !c.t.Routed || slices.Contains(p.Destinations, d.Chat) {
			out = append(out, i)
		}
	}
	return out
}

// routeViolations counts the (package, destination) pairs holding a part
// of a package that no route sends there (no publication of it is routed
// there), and names them.
func (c *checker) routeViolations(rep *Report, seen []map[partRef]int) {
	if !c.t.Routed {
		return
	}
	allowed := map[Hash][]tg.ChatID{}
	names := map[Hash]string{}
	for _, p := range c.t.Packages {
		allowed[p.Hash] = append(allowed[p.Hash], p.Destinations...)
		if _, ok := names[p.Hash]; !ok {
			names[p.Hash] = p.Name
		}
	}
	for i, d := range c.t.Destinations {
		bad := map[Hash]bool{}
		for ref := range seen[i] {
			if !slices.Contains(allowed[ref.hash], d.Chat) {
				bad[ref.hash] = true
			}
		}
		for h := range bad {
			rep.RouteViolations++
			rep.RouteViolationNames = append(rep.RouteViolationNames, fmt.Sprintf("%s in %d: no route sends it there", names[h], d.Chat))
		}
	}
	sort.Strings(rep.RouteViolationNames)
}

// topicViolations counts the copies of packages that a route sends into a
// forum topic of a destination but that are in another topic there (a
// route violation each), and names them. A copy is in place when some
// publication of its package wants it there.
func (c *checker) topicViolations(rep *Report, carries map[string]partRef) {
	if !c.t.Routed {
		return
	}
	wants := map[Hash]map[tg.ChatID][]TopicWant{}
	names := map[Hash]string{}
	for _, p := range c.t.Packages {
		if _, ok := names[p.Hash]; !ok {
			names[p.Hash] = p.Name
		}
		for _, d := range p.Destinations {
			if wants[p.Hash] == nil {
				wants[p.Hash] = map[tg.ChatID][]TopicWant{}
			}
			// A destination without a topic wants the chat itself.
			wants[p.Hash][d] = append(wants[p.Hash][d], p.Topics[d])
		}
	}
	for _, d := range c.t.Destinations {
		for _, doc := range d.Docs {
			ref, ok := carries[doc.File]
			if !ok {
				continue
			}
			want := wants[ref.hash][d.Chat]
			if len(want) == 0 || slices.ContainsFunc(want, func(w TopicWant) bool { return w.holds(doc) }) {
				continue // not routed there at all: routeViolations counts it
			}
			rep.RouteViolations++
			rep.RouteViolationNames = append(rep.RouteViolationNames, fmt.Sprintf("%s part %d in %d: in topic %d (%q), not the topic its route names",
				names[ref.hash], ref.idx, d.Chat, doc.Thread, doc.TopicName))
		}
	}
	sort.Strings(rep.RouteViolationNames)
}

// describeCopies names each copy of a part found twice in a destination:
// its message, its token and the delivery the token belongs to, which tells
// a send repeated for one intent from two packages sharing a file.
func (c *checker) describeCopies(ctx context.Context, docs []Doc) (string, error) {
	out := make([]string, len(docs))
	for i, doc := range docs {
		var pkg int64
		var part, parts int
		var state, name string
		err := c.st.Pool().QueryRow(ctx, `SELECT d.package_id, d.part_idx, d.state, p.name, p.part_count
			FROM deliveries d JOIN packages p ON p.id = d.package_id WHERE d.token = $1`, doc.Token).Scan(&pkg, &part, &state, &name, &parts)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			out[i] = fmt.Sprintf("message %d token %q: no delivery", doc.Message.ServerID(), doc.Token)
		case err != nil:
			return "", fmt.Errorf("read the delivery of token %q: %w", doc.Token, err)
		default:
			out[i] = fmt.Sprintf("message %d: package %d (%q, %d parts) part %d, %s", doc.Message.ServerID(), pkg, name, parts, part, state)
		}
	}
	return strings.Join(out, "; "), nil
}

// describeParts says what the catalogue holds about the messages of a
// package it lacks: how each was handled and, when it went into a
// package, that package's name and parts, which tells a set assembled
// from other messages than the ones posted together.
func (c *checker) describeParts(ctx context.Context, parts []Part) (string, error) {
	out := make([]string, len(parts))
	for i, pt := range parts {
		k := pt.Key()
		var desc string
		err := c.st.Pool().QueryRow(ctx, `SELECT format('message %s: %s, set %L part %s, handled %s%s', m.message_id >> 20, m.outcome,
				m.set_key, m.part_index, to_char(m.handled_at, 'HH24:MI:SS.MS'),
				CASE WHEN p.id IS NULL THEN '' ELSE format(', package %s (%L, %s parts, first message %s)', p.id, p.name, p.part_count,
					(SELECT min(message_id) >> 20 FROM source_messages o WHERE o.package_id = p.id AND o.outcome = 'package')) END)
			FROM source_messages m LEFT JOIN packages p ON p.id = m.package_id
			WHERE m.chat_id = $1 AND m.message_id = $2`, int64(k.Chat), int64(k.Message)).Scan(&desc)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			out[i] = fmt.Sprintf("message %d: not handled", k.Message.ServerID())
		case err != nil:
			return "", fmt.Errorf("describe message %s: %w", k, err)
		default:
			out[i] = desc
		}
	}
	return strings.Join(out, "; "), nil
}

// describeDeliveries says what the catalogue holds about the deliveries
// of package pkg: each delivery row and each queued delivery, for a
// package the destinations lack.
func (c *checker) describeDeliveries(ctx context.Context, pkg int64) (string, error) {
	rows, err := c.st.Pool().Query(ctx, `SELECT format('delivery to %s part %s: %s, message %s, by %s%s',
			destination_chat_id, part_idx, state, coalesce(dest_message_id::text, 'none'), account,
			CASE WHEN error <> '' THEN ', ' || error ELSE '' END)
		FROM deliveries WHERE package_id = $1
		UNION ALL
		SELECT format('queued to %s for %s, route %L, opens %s, %s attempts%s', destination_chat_id, account, route,
			opens_at, attempts, CASE WHEN last_error <> '' THEN ', ' || last_error ELSE '' END)
		FROM waiting_deliveries WHERE package_id = $1`, pkg)
	if err != nil {
		return "", fmt.Errorf("describe the deliveries of package %d: %w", pkg, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("describe the deliveries of package %d: %w", pkg, err)
	}
	if len(lines) == 0 {
		return "no delivery recorded or queued", nil
	}
	return strings.Join(lines, "; "), nil
}

// vanished checks the packages whose sends the world deleted instead of
// sending (updateDeleteMessages): each must have been delivered later, or
// be a dead letter with its reason.
func (c *checker) vanished(ctx context.Context, rep *Report, delivered map[Hash]bool, dead map[tg.MessageKey]string) error {
	rep.FailedSends, rep.FloodWaitedSends, rep.ResentSends = c.t.FailedSends, c.t.FloodWaitedSends, c.t.ResentSends
	rep.ClosedTopics, rep.DeletedTopics, rep.ChatFloodedSends = c.t.ClosedTopics, c.t.DeletedTopics, c.t.ChatFloodedSends
	rep.ChatWaitsSatOut = c.t.ChatWaitsSatOut
	var tokens []string
	for _, caption := range c.t.VanishedCaptions {
		rep.VanishedSends++
		if tok := ingest.TokenOf(caption); tok != "" {
			tokens = append(tokens, tok)
		}
	}
	if len(tokens) == 0 {
		return nil
	}
	rows, err := c.st.Pool().Query(ctx, `SELECT DISTINCT p.id, p.content_hash, p.name FROM deliveries d
		JOIN packages p ON p.id = d.package_id WHERE d.token = ANY($1)`, tokens)
	if err != nil {
		return fmt.Errorf("read packages of vanished sends: %w", err)
	}
	type pkg struct {
		id   int64
		hash []byte
		name string
	}
	var pkgs []pkg
	for rows.Next() {
		var p pkg
		if err := rows.Scan(&p.id, &p.hash, &p.name); err != nil {
			rows.Close()
			return fmt.Errorf("read packages of vanished sends: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read packages of vanished sends: %w", err)
	}
	for _, p := range pkgs {
		if delivered[Hash(p.hash)] {
			rep.VanishedDelivered++
			continue
		}
		reason, err := c.partDeadLetter(ctx, p.id, dead)
		if err != nil {
			return err
		}
		if reason != "" {
			rep.VanishedDeadLettered++
			continue
		}
		rep.VanishedUnresolved++
		rep.MissingNames = append(rep.MissingNames, fmt.Sprintf("%s: a send vanished and the package was neither delivered nor dead-lettered", p.name))
	}
	return nil
}

// partDeadLetter returns the reason of a dead letter on any source part of
// package id, "" when there is none.
func (c *checker) partDeadLetter(ctx context.Context, id int64, dead map[tg.MessageKey]string) (string, error) {
	rows, err := c.st.Pool().Query(ctx, `SELECT source_chat_id, source_message_id FROM package_parts WHERE package_id = $1
		UNION SELECT chat_id, message_id FROM source_messages WHERE package_id = $1`, id)
	if err != nil {
		return "", fmt.Errorf("read parts of package %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var chat, msg int64
		if err := rows.Scan(&chat, &msg); err != nil {
			return "", fmt.Errorf("read parts of package %d: %w", id, err)
		}
		if reason := dead[tg.MessageKey{Chat: tg.ChatID(chat), Message: tg.MessageID(msg)}]; reason != "" {
			return reason, nil
		}
	}
	return "", rows.Err()
}

// How a fault knob explains an undelivered package.
const (
	explainedLost = iota + 1
	explainedProtected
)

// faulty reports whether p was published in a source that lost access or
// protects its content.
func (c *checker) faulty(p Package) bool {
	if len(p.Parts) == 0 {
		return false
	}
	chat := p.Parts[0].Chat
	return c.lost[chat] || c.protected[chat]
}

// faultExplained counts the sources the fault knobs hit and returns, by
// hash, the packages they explain: every publication of the hash is in a
// source recorded inaccessible with a reason (explainedLost), or in a
// protected source with a part recorded as a protected-content dead letter
// (explainedProtected).
func (c *checker) faultExplained(ctx context.Context, dead map[tg.MessageKey]string, rep *Report) (map[Hash]int, error) {
	recorded, err := RecordedInaccessible(ctx, c.st, c.t.Lost)
	if err != nil {
		return nil, err
	}
	rep.InaccessibleSources, rep.RecordedInaccessible, rep.ProtectedSources = len(c.lost), len(recorded), len(c.protected)
	for _, id := range c.t.Lost {
		rep.InaccessibleSourceIDs = append(rep.InaccessibleSourceIDs, int64(id))
	}
	slices.Sort(rep.InaccessibleSourceIDs)
	out := map[Hash]int{}
	blocked := map[Hash]bool{} // a publication no fault explains
	for _, p := range c.t.Packages {
		if p.Incomplete || len(p.Parts) == 0 {
			continue
		}
		chat := p.Parts[0].Chat
		why := 0
		switch {
		case recorded[chat]:
			why = explainedLost
		case c.protected[chat]:
			for _, part := range p.Parts {
				if strings.Contains(dead[part.Key()], "protected content") {
					why = explainedProtected
				}
			}
		}
		if why == 0 {
			blocked[p.Hash] = true
			continue
		}
		if out[p.Hash] == 0 || why == explainedLost {
			out[p.Hash] = why
		}
	}
	for h := range blocked {
		delete(out, h)
	}
	return out, nil
}

// RecordedInaccessible returns which of the lost sources the catalogue
// records as inaccessible, with a reason.
func RecordedInaccessible(ctx context.Context, st *store.Store, lost []tg.ChatID) (map[tg.ChatID]bool, error) {
	srcs, err := st.Sources(ctx, "")
	if err != nil {
		return nil, err
	}
	want := set(lost)
	out := map[tg.ChatID]bool{}
	for _, s := range srcs {
		if want[s.ChatID] && s.Access == store.AccessLost && s.AccessReason != "" {
			out[s.ChatID] = true
		}
	}
	return out, nil
}

// deadBroken reports whether every part of p is a dead letter for a broken
// archive (ingest.BrokenArchiveError).
func deadBroken(p Package, dead map[tg.MessageKey]string) bool {
	for _, part := range p.Parts {
		if !strings.Contains(dead[part.Key()], ingest.BrokenReason) {
			return false
		}
	}
	return len(p.Parts) > 0
}

func deadLetterReasons(ctx context.Context, st *store.Store) (map[tg.MessageKey]string, error) {
	rows, err := st.Pool().Query(ctx, `SELECT chat_id, message_id, reason FROM dead_letters WHERE state <> 'resolved'`)
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	defer rows.Close()
	out := map[tg.MessageKey]string{}
	for rows.Next() {
		var chat, msg int64
		var reason string
		if err := rows.Scan(&chat, &msg, &reason); err != nil {
			return nil, fmt.Errorf("read dead letters: %w", err)
		}
		out[tg.MessageKey{Chat: tg.ChatID(chat), Message: tg.MessageID(msg)}] = reason
	}
	return out, rows.Err()
}

// catalogueLag returns the 99th percentile, over the unique packages
// catalogued, of the time from publication to the package's catalogue row;
// zero when none is catalogued or the truth carries no dates.
func (c *checker) catalogueLag(ctx context.Context, unique map[Hash]Package) (float64, error) {
	rows, err := c.st.Pool().Query(ctx, `SELECT content_hash, created_at FROM packages`)
	if err != nil {
		return 0, fmt.Errorf("read catalogue times: %w", err)
	}
	defer rows.Close()
	var lags []float64
	for rows.Next() {
		var h []byte
		var at time.Time
		if err := rows.Scan(&h, &at); err != nil {
			return 0, fmt.Errorf("read catalogue times: %w", err)
		}
		p, ok := unique[Hash(h)]
		if !ok || p.Published.IsZero() {
			continue
		}
		lags = append(lags, max(at.Sub(p.Published).Seconds(), 0))
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read catalogue times: %w", err)
	}
	if len(lags) == 0 {
		return 0, nil
	}
	slices.Sort(lags)
	return lags[(len(lags)*99+99)/100-1], nil
}
