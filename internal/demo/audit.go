package demo

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"stashd/ingest"
	"stashd/store"
	"stashd/tg"
	"stashd/tg/tgsim"
)

// partRef names one part of one published package.
type partRef struct {
	hash [32]byte
	idx  int
}

// audit compares the simulator's ground truth with the catalogue and the
// destinations:
//   - every distinct complete package is catalogued and every one of its
//     parts is in every destination (else it is missing);
//   - no part of a package is in a destination twice;
//   - corrupt archives are catalogued with a listing error;
//   - incomplete sets are dead letters with a reason and were never
//     delivered;
//   - every package whose send vanished (updateDeleteMessages) was
//     delivered later or is a dead letter with its reason.
func (r *runner) audit(ctx context.Context) (Report, error) {
	truth := r.gen.Truth()
	unique := truth.Unique()
	rep := Report{UniquePackages: len(unique)}
	dead, err := r.deadLetterReasons(ctx)
	if err != nil {
		return rep, err
	}
	explained, err := r.faultExplained(ctx, truth, dead, &rep)
	if err != nil {
		return rep, err
	}

	// Which file (unique id) carries which part: from the sources as they
	// are now, so the audit reads the world rather than trusting stashd.
	uid := map[tg.MessageKey]string{}
	for _, s := range r.gen.Sources() {
		for _, m := range r.world.Messages(s.Chat) {
			if m.Document != nil {
				uid[m.Key()] = m.Document.File.UniqueID
			}
		}
	}
	carries := map[string]partRef{}
	for _, p := range truth.Packages {
		rep.PublishedArchives++
		for i, k := range p.Parts {
			if u, ok := uid[k]; ok {
				carries[u] = partRef{p.Hash, i}
			}
		}
	}

	catalogue, err := r.st.PackageHashes(ctx)
	if err != nil {
		return rep, err
	}
	dests := r.gen.Destinations()
	ra := r.newRouteAudit(truth, dests)
	seen := make([]map[partRef]int, len(dests))
	for i, d := range dests {
		seen[i] = map[partRef]int{}
		for _, m := range r.world.Messages(d) {
			if m.Document == nil {
				continue
			}
			if ref, ok := carries[m.Document.File.UniqueID]; ok {
				seen[i][ref]++
			}
		}
		for ref, n := range seen[i] {
			if n > 1 {
				rep.DuplicateDeliveries += n - 1
				rep.DuplicateNames = append(rep.DuplicateNames, fmt.Sprintf("%s part %d in %d: %d copies", unique[ref.hash].Name, ref.idx, dests[i], n))
			}
		}
	}

	for _, p := range unique {
		var size int64
		for _, k := range p.Parts {
			size += int64(len(r.world.FileData(uid[k])))
		}
		rep.largestPackage = max(rep.largestPackage, size)
	}
	deliveredHash := map[[32]byte]bool{}
	for h, p := range unique {
		pkg, catalogued := catalogue[h]
		if catalogued {
			rep.CataloguedPackages++
		}
		delivered, missingPairs := true, 0
		for _, i := range ra.required(p) {
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
		if !catalogued || !delivered {
			rep.Missing += max(missingPairs, 1) // per required (package, destination) pair
			rep.MissingNames = append(rep.MissingNames, fmt.Sprintf("%s at %s (catalogued %v, delivered %v)", p.Name, p.Parts[0], catalogued, delivered))
		}
		if p.Corrupt {
			rep.Corrupt++
			if catalogued && pkg.ListingError != "" {
				rep.CorruptListingErrors++
			}
		}
	}
	sort.Strings(rep.MissingNames)
	ra.violations(&rep, seen, truth)

	for _, p := range truth.Packages {
		if !p.Incomplete || r.faulty(p) {
			continue
		}
		rep.IncompleteSets++
		all := len(p.Parts) > 0
		for _, k := range p.Parts {
			if !strings.Contains(dead[k], "incomplete set") {
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
	rep.DeadLetters = len(dead)
	expected := map[tg.MessageKey]bool{}
	for _, p := range truth.Packages {
		if p.Incomplete || r.faulty(p) {
			for _, k := range p.Parts {
				expected[k] = true
			}
		}
	}
	for k, reason := range dead {
		if !expected[k] {
			rep.OtherDeadLetters = append(rep.OtherDeadLetters, fmt.Sprintf("%s: %s", k, reason))
		}
	}
	sort.Strings(rep.OtherDeadLetters)
	if err := r.auditVanished(ctx, &rep, deliveredHash, dead); err != nil {
		return rep, err
	}
	return rep, nil
}

// auditVanished checks the packages whose sends the world deleted instead
// of sending (updateDeleteMessages): each must have been delivered later,
// or be a dead letter with its reason.
func (r *runner) auditVanished(ctx context.Context, rep *Report, delivered map[[32]byte]bool, dead map[tg.MessageKey]string) error {
	stats := r.world.SendStats()
	rep.FailedSends, rep.FloodWaitedSends, rep.ResentSends = stats.Failed, stats.FloodWaited, stats.Resent
	var tokens []string
	for _, c := range r.world.VanishedCaptions() {
		rep.VanishedSends++
		for line := range strings.SplitSeq(c, "\n") {
			if tok, ok := strings.CutPrefix(line, ingest.TokenPrefix); ok {
				tokens = append(tokens, tok)
			}
		}
	}
	if len(tokens) == 0 {
		return nil
	}
	rows, err := r.st.Pool().Query(ctx, `SELECT DISTINCT p.id, p.content_hash, p.name FROM deliveries d
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
		if delivered[[32]byte(p.hash)] {
			rep.VanishedDelivered++
			continue
		}
		reason, err := r.partDeadLetter(ctx, p.id, dead)
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
func (r *runner) partDeadLetter(ctx context.Context, id int64, dead map[tg.MessageKey]string) (string, error) {
	rows, err := r.st.Pool().Query(ctx, `SELECT source_chat_id, source_message_id FROM package_parts WHERE package_id = $1
		UNION SELECT chat_id, message_id FROM source_messages WHERE package_id = $1`, id)
	if err != nil {
		return "", fmt.Errorf("read parts of package %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var c, m int64
		if err := rows.Scan(&c, &m); err != nil {
			return "", fmt.Errorf("read parts of package %d: %w", id, err)
		}
		if reason := dead[tg.MessageKey{Chat: tg.ChatID(c), Message: tg.MessageID(m)}]; reason != "" {
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
func (r *runner) faulty(p tgsim.ExpectedPackage) bool {
	if len(p.Parts) == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	chat := p.Parts[0].Chat
	return r.lost[chat] || r.protected[chat]
}

// faultExplained counts the sources the fault knobs hit and returns, by
// hash, the packages they explain: every publication of the hash is in a
// source recorded inaccessible with a reason (explainedLost), or in a
// protected source with a part recorded as a protected-content dead letter
// (explainedProtected).
func (r *runner) faultExplained(ctx context.Context, truth tgsim.Truth, dead map[tg.MessageKey]string, rep *Report) (map[[32]byte]int, error) {
	srcs, err := r.st.Sources(ctx, "")
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	recorded := map[tg.ChatID]bool{}
	for _, s := range srcs {
		if r.lost[s.ChatID] && s.Access == store.AccessLost && s.AccessReason != "" {
			recorded[s.ChatID] = true
		}
	}
	rep.InaccessibleSources, rep.RecordedInaccessible, rep.ProtectedSources = len(r.lost), len(recorded), len(r.protected)
	out := map[[32]byte]int{}
	blocked := map[[32]byte]bool{} // a publication no fault explains
	for _, p := range truth.Packages {
		if p.Incomplete || len(p.Parts) == 0 {
			continue
		}
		chat := p.Parts[0].Chat
		why := 0
		switch {
		case recorded[chat]:
			why = explainedLost
		case r.protected[chat]:
			for _, k := range p.Parts {
				if strings.Contains(dead[k], "protected content") {
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

func (r *runner) deadLetterReasons(ctx context.Context) (map[tg.MessageKey]string, error) {
	rows, err := r.st.Pool().Query(ctx, `SELECT chat_id, message_id, reason FROM dead_letters WHERE state <> 'resolved'`)
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	defer rows.Close()
	out := map[tg.MessageKey]string{}
	for rows.Next() {
		var c, m int64
		var reason string
		if err := rows.Scan(&c, &m, &reason); err != nil {
			return nil, err
		}
		out[tg.MessageKey{Chat: tg.ChatID(c), Message: tg.MessageID(m)}] = reason
	}
	return out, rows.Err()
}
