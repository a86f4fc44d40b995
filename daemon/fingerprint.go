package daemon

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// configFingerprint is what account a does under cfg that every instance
// sharing the database must agree on, since any of them may run it: the
// chats it watches (with their topics and history), where packages go (the
// routes with their destinations, topics, filters and windows, or the
// plain destinations) and which packages are delivered at all (broken
// archives, repacks). The routes count whole: any account of the daemon
// may send a route's deliveries (spread, hand-over). Secrets, paths and
// pacing are left out: they differ by host without changing what is
// delivered where.
//
// Summary is one "key: value" line per item, in a canonical order (what
// the configuration lists as a set is sorted), and Fingerprint the
// SHA-256 of it, so that two configurations written differently but
// meaning the same thing match.
func configFingerprint(cfg Config, a Account) store.AccountConfig {
	var lines []string
	add := func(key, value string) { lines = append(lines, key+": "+value) }
	add("sources", joinSorted(chatIDs(a.Sources)))
	if len(a.Named) > 0 {
		named := make([]string, len(a.Named))
		for i, n := range a.Named {
			named[i] = "@" + strings.ToLower(strings.TrimPrefix(n, "@"))
		}
		add("named sources", joinSorted(named))
	}
	for _, chat := range sortedKeys(a.Topics) {
		add("topics of "+chatKey(chat), joinSorted(int64s(a.Topics[chat])))
	}
	for _, chat := range sortedKeys(a.History) {
		h := a.History[chat]
		switch {
		case h.None:
			add("history of "+chatKey(chat), "none")
		case h.Since > 0:
			add("history of "+chatKey(chat), "since "+h.Since.String())
		}
	}
	if len(cfg.Routes) > 0 {
		for _, r := range slices.SortedFunc(slices.Values(cfg.Routes), func(x, y route.Spec) int { return cmp.Compare(x.Name, y.Name) }) {
			add("route "+r.Name, routeLine(r))
		}
	} else {
		dests := chatIDs(cfg.Destinations)
		for _, n := range cfg.DestinationNames {
			dests = append(dests, "@"+strings.ToLower(strings.TrimPrefix(n, "@")))
		}
		add("destinations", joinSorted(dests))
	}
	add("broken archives", map[bool]string{true: "dead-lettered", false: "delivered"}[cfg.Ingest.DeadLetterBroken])
	add("repacks", cmp.Or(cfg.Ingest.Repacks, "skip"))
	summary := strings.Join(lines, "\n")
	sum := sha256.Sum256([]byte(summary))
	return store.AccountConfig{Fingerprint: hex.EncodeToString(sum[:]), Summary: summary}
}

// routeLine is route r in a canonical form: "SOURCES -> DESTINATIONS" and
// its filter and window.
func routeLine(r route.Spec) string {
	var srcs, dests []string
	for _, s := range r.Sources {
		text := chatText(s.Chat)
		if len(s.Topics) > 0 {
			text += " topics " + strings.Join(sortedInts(s.Topics), "+")
		}
		srcs = append(srcs, text)
	}
	for i, d := range r.Destinations {
		text := chatText(d)
		if i < len(r.Topics) && !r.Topics[i].IsZero() {
			text += " topic " + r.Topics[i].String()
		}
		dests = append(dests, text)
	}
	line := joinSorted(srcs) + " -> " + joinSorted(dests)
	f := r.Filter
	if len(f.Formats) > 0 {
		formats := make([]string, len(f.Formats))
		for i, x := range f.Formats {
			formats[i] = strings.ToLower(x)
		}
		line += "; formats " + joinSorted(formats)
	}
	if len(f.Include) > 0 {
		line += "; include " + joinSorted(patterns(f.Include))
	}
	if len(f.Exclude) > 0 {
		line += "; exclude " + joinSorted(patterns(f.Exclude))
	}
	if f.MinSize > 0 || f.MaxSize > 0 {
		line += fmt.Sprintf("; size %d-%d", f.MinSize, f.MaxSize)
	}
	if r.Window != nil {
		line += "; window " + r.Window.String()
	}
	return line
}

// chatKey is key of Account.Topics or History (a chat id, or "@username")
// with the username without regard to case.
func chatKey(key string) string {
	if strings.HasPrefix(key, "@") {
		return strings.ToLower(key)
	}
	return key
}

// sortedKeys are m's keys in the order of their chatKey.
func sortedKeys[V any](m map[string]V) []string {
	return slices.SortedFunc(maps.Keys(m), func(x, y string) int { return cmp.Compare(chatKey(x), chatKey(y)) })
}

// chatText is c as the configuration names it, a username without regard
// to case.
func chatText(c route.Chat) string {
	if c.Username != "" {
		return "@" + strings.ToLower(c.Username)
	}
	return c.String()
}

func chatIDs(ids []tg.ChatID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprint(int64(id))
	}
	return out
}

func int64s(xs []int64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprint(x)
	}
	return out
}

func sortedInts(xs []int64) []string {
	s := slices.Sorted(slices.Values(xs))
	return int64s(slices.Compact(s))
}

// patterns are ps as written, globs without regard to case (as they
// match); regular expressions are taken as written.
func patterns(ps []route.Pattern) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
		if !strings.HasPrefix(out[i], "re:") {
			out[i] = strings.ToLower(out[i])
		}
	}
	return out
}

// joinSorted joins the distinct items of xs in order, "none" when empty.
func joinSorted(xs []string) string {
	s := slices.Compact(slices.Sorted(slices.Values(xs)))
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// configDiff says how summary differs from theirs, item by item, as
// "KEY: here VALUE, holder VALUE" ("-" for an item one side lacks),
// " | "-separated.
func configDiff(summary, theirs string) string {
	mine, other := summaryItems(summary), summaryItems(theirs)
	keys := slices.Sorted(maps.Keys(mine))
	for k := range other {
		if _, ok := mine[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		m, o := mine[k], other[k]
		if m != o {
			out = append(out, fmt.Sprintf("%s: here %s, holder %s", k, cmp.Or(m, "-"), cmp.Or(o, "-")))
		}
	}
	if len(out) == 0 {
		// Same items, another hash: a holder of another stashd version
		// summing other items.
		return "the same items, fingerprinted otherwise (another stashd version?)"
	}
	return strings.Join(out, " | ")
}

func summaryItems(summary string) map[string]string {
	items := map[string]string{}
	for line := range strings.SplitSeq(summary, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			items[k] = v
		}
	}
	return items
}

// compareConfig compares this instance's configuration of the account
// with the one its lease holder wrote (lease, as read while standing by):
// stashd_config_mismatch says whether they differ, and every change of
// the holder's configuration or of the outcome is logged once (a warning
// naming what differs) and recorded for stashd status. A holder that
// recorded none (another stashd version) is taken as matching: the
// configuration the lease carries is then a predecessor's, written by
// another instance than the holder.
//
// The record of a difference lapses after mismatchLife lease TTLs unless
// renewed, which is done every TTL while it lasts: this instance, once
// restarted (another host:pid) or gone, leaves none behind for good.
func (l *leaser) compareConfig(ctx context.Context, lease store.Lease) {
	me := l.d.cfg.Instance
	theirs := lease.Config
	if lease.ConfigBy != lease.Owner {
		theirs = store.AccountConfig{}
	}
	differs := ""
	if theirs.Fingerprint != "" && lease.ConfigBy != me && theirs.Fingerprint != l.config.Fingerprint {
		differs = configDiff(l.config.Summary, theirs.Summary)
	}
	// Set on return, once the warning below is written: whoever sees the
	// gauge finds the warning in the log.
	defer l.d.leaseM.mismatch.WithLabelValues(l.a.Name).Set(map[bool]float64{true: 1, false: 0}[differs != ""])
	seen := lease.ConfigBy + "\x00" + theirs.Fingerprint
	changed := seen != l.seen
	if !changed && (differs == "" || time.Since(l.recorded) < l.ttl) {
		return
	}
	was := l.seen
	l.seen = seen
	switch {
	case !changed: // a renewal of the record
	case differs != "":
		l.log.Warn("this instance's configuration of the account differs from its lease holder's: should the holder go, "+
			"this instance takes the account over and runs it as configured here; configure every instance sharing the database the same way",
			"holder", lease.ConfigBy, "differs", differs, "fingerprint", short(l.config.Fingerprint), "holder_fingerprint", short(theirs.Fingerprint))
	case was != "":
		l.log.Info("this instance's configuration of the account matches its lease holder's", "holder", lease.ConfigBy)
	}
	m := store.ConfigMismatch{Account: l.a.Name, Instance: me, Holder: lease.ConfigBy,
		HolderFingerprint: theirs.Fingerprint, Fingerprint: l.config.Fingerprint, Differs: differs}
	if err := l.d.leases.RecordConfigMismatch(ctx, m, mismatchLife*l.ttl); err != nil {
		if changed {
			l.log.Warn("record the configuration mismatch", "err", err)
		}
		l.seen = was // recorded at the next look
		return
	}
	l.recorded = time.Now()
}

// mismatchLife is how many lease TTLs a recorded configuration mismatch
// lasts unless renewed: its instance renews it every TTL, so two looks at
// the lease may fail in a row without it lapsing.
const mismatchLife = 3

// tookConfig follows an acquisition of the lease, a: this instance's
// configuration is the account's now (tryAcquire set
// stashd_config_mismatch to 0), what was found against another one no
// longer holds, and a takeover from an
// instance configured otherwise is logged (the instances standing by
// report the difference from now on).
func (l *leaser) tookConfig(ctx context.Context, a store.Acquired) {
	l.seen = ""
	if err := l.d.leases.ClearConfigMismatches(ctx, l.a.Name, l.d.cfg.Instance, l.config.Fingerprint); err != nil {
		l.log.Warn("clear the account's configuration mismatches", "err", err)
	}
	prev := a.PrevConfig
	if prev.Fingerprint == "" || a.PrevConfigBy == l.d.cfg.Instance || prev.Fingerprint == l.config.Fingerprint {
		return
	}
	l.log.Warn("took the account over with a configuration differing from its previous holder's: it runs as configured here now",
		"previous_holder", a.PrevConfigBy, "differs", configDiff(l.config.Summary, prev.Summary))
}

// short is a fingerprint's first 12 digits, enough to tell two apart in a
// log line.
func short(fingerprint string) string { return fingerprint[:min(12, len(fingerprint))] }
