package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// resolve turns an account's named sources and destinations into chat ids
// (resolveName: the first resolution is kept) and builds its topic filter.
// A name that does not resolve is an error that stops the start: a typo in
// the configuration must not look like an idle source.
func (d *Daemon) resolve(ctx context.Context, r *accountRun, a Account) (Account, []tg.ChatID, func(tg.Message) bool, error) {
	byName := map[string]tg.ChatID{}
	lookup := func(name string) (tg.ChatID, error) {
		if id, ok := byName[name]; ok {
			return id, nil
		}
		id, err := d.resolveName(ctx, r, name)
		if err != nil {
			return 0, fmt.Errorf("resolve @%s: %w", name, err)
		}
		byName[name] = id
		return id, nil
	}
	out := a
	out.Sources = append([]tg.ChatID(nil), a.Sources...)
	for _, name := range a.Named {
		id, err := lookup(name)
		if err != nil {
			return a, nil, nil, err
		}
		out.Sources = append(out.Sources, id)
	}
	dests := append([]tg.ChatID(nil), d.cfg.Destinations...)
	for _, name := range d.cfg.DestinationNames {
		id, err := lookup(name)
		if err != nil {
			return a, nil, nil, err
		}
		dests = append(dests, id)
	}
	topics := map[tg.ChatID]map[int64]bool{}
	for key, list := range a.Topics {
		var id tg.ChatID
		if name, ok := strings.CutPrefix(key, "@"); ok {
			var err error
			if id, err = lookup(name); err != nil {
				return a, nil, nil, err
			}
		} else {
			n, err := strconv.ParseInt(key, 10, 64)
			if err != nil {
				return a, nil, nil, fmt.Errorf("topic filter key %q is neither a chat id nor @username", key)
			}
			id = tg.ChatID(n)
		}
		topics[id] = map[int64]bool{}
		for _, t := range list {
			topics[id][t] = true
		}
	}
	var accept func(tg.Message) bool
	if len(topics) > 0 {
		accept = func(m tg.Message) bool {
			allowed, filtered := topics[m.ChatID]
			return !filtered || allowed[m.TopicID()]
		}
	}
	return out, dests, accept, nil
}

// resolveRoutes resolves the routes' usernames through the account's
// session (searchPublicChat, once per name). Every problem is reported,
// one line each.
func (d *Daemon) resolveRoutes(ctx context.Context, r *accountRun) (*route.Table, error) {
	if len(d.cfg.Routes) == 0 {
		return nil, nil
	}
	byName := map[string]tg.ChatID{}
	lookup := func(name string) (tg.ChatID, error) {
		if id, ok := byName[name]; ok {
			return id, nil
		}
		id, err := d.resolveName(ctx, r, name)
		if err != nil {
			return 0, fmt.Errorf("unknown chat: %w", err)
		}
		byName[name] = id
		return id, nil
	}
	var routes []route.Route
	var errs []error
	for _, s := range d.cfg.Routes {
		rt, err := s.Resolve(lookup)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		routes = append(routes, rt)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("resolve routes:\n%w", errors.Join(errs...))
	}
	return route.NewTable(nil, routes), nil
}

// resolveHistory keys the account's history policies by chat id.
func (d *Daemon) resolveHistory(ctx context.Context, r *accountRun, a Account) (map[tg.ChatID]History, error) {
	out := map[tg.ChatID]History{}
	for key, h := range a.History {
		if name, ok := strings.CutPrefix(key, "@"); ok {
			id, err := d.resolveName(ctx, r, name)
			if err != nil {
				return nil, fmt.Errorf("resolve @%s: %w", name, err)
			}
			out[id] = h
			continue
		}
		n, err := strconv.ParseInt(key, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("history key %q is neither a chat id nor @username", key)
		}
		out[tg.ChatID(n)] = h
	}
	return out, nil
}

// historyStart is where a newly added source catches up from under its
// history policy: its newest message (none), or the newest message older
// than the policy's stretch, as a watermark (server id). A chat without
// such a message, or the policy "all", starts at 0, its beginning.
func historyStart(ctx context.Context, r *accountRun, chat tg.ChatID, h History) (int64, error) {
	if !h.None && h.Since <= 0 {
		return 0, nil
	}
	at := time.Now()
	if !h.None {
		at = at.Add(-h.Since)
	}
	// TDLib answers from the chat's last message as the session knows it
	// when the date is not before it: a session that did not run while
	// messages were posted there knows them once the chat is opened and
	// its difference is in.
	if err := r.views.Current(ctx, chat); err != nil {
		return 0, fmt.Errorf("open source %d to find the start of its history: %w", chat, err)
	}
	m, err := r.paced.GetChatMessageByDate(ctx, chat, at)
	switch {
	case errors.Is(err, tg.ErrMessageNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("find the start of source %d's history: %w", chat, err)
	}
	// The answer may be the session's own message being sent or failed
	// there (a source that is also a destination): the server message it
	// followed is the start.
	start := m.ID.ServerFloor()
	r.log.Info("new source catches up from its history policy", "source", chat, "none", h.None, "since", h.Since, "from_message", start)
	return start, nil
}

// registerSources records sources the store does not know yet, with their
// kind, title and where each catches up from (histories). Known sources
// cost no call: a restart must stay cheap.
//
// A chat listed as a source of several accounts is read by one, the one
// recorded for it: each catch-up, rescan and watermark is that account's,
// and its session is the one whose database the watermark describes. It
// stays with that account while it can still be read there (keepsSource);
// otherwise the account starting takes it over.
func (d *Daemon) registerSources(ctx context.Context, r *accountRun, a Account, histories map[tg.ChatID]History) error {
	recorded := map[tg.ChatID]store.Source{}
	srcs, err := d.store.Sources(ctx, "")
	if err != nil {
		return err
	}
	for _, s := range srcs {
		recorded[s.ChatID] = s
	}
	owners := &ownerLooks{}
	for _, chat := range a.Sources {
		if s, ok := recorded[chat]; ok {
			if s.Account == a.Name {
				continue
			}
			moved, err := d.takeOver(ctx, r, owners, s)
			if err != nil {
				return err
			}
			if !moved {
				r.log.Debug("source read by another account", "source", chat, "account_reading_it", s.Account)
			}
			continue
		}
		if err := d.registerNew(ctx, r, chat, histories, 0); err != nil {
			return err
		}
	}
	return nil
}

// registerNew records chat, a source the store does not know, for r's
// account: its kind, title and where it catches up from (its history
// policy in histories, never past floor when that is above zero).
func (d *Daemon) registerNew(ctx context.Context, r *accountRun, chat tg.ChatID, histories map[tg.ChatID]History, floor int64) error {
	src := store.Source{ChatID: chat, Account: r.name, Kind: tg.KindChannel}
	c, err := r.paced.GetChat(ctx, chat)
	accessible := err == nil
	switch {
	case err == nil:
		src.Kind, src.Title = c.Kind, c.Title
	case tg.Classify(err) == tg.ClassPermanent:
		// Registered anyway: catch-up opens its circuit and the
		// dashboard shows it; one bad source never stops the others.
		r.log.Warn("source not accessible", "source", chat, "err", err)
	default:
		return fmt.Errorf("get chat %d: %w", chat, err)
	}
	// The start goes in with the source: a start cut short before it
	// is found registers nothing, and the next start asks again.
	if h, ok := histories[chat]; ok && accessible {
		if src.Watermark, err = historyStart(ctx, r, chat, h); err != nil {
			return err
		}
	}
	if floor > 0 && src.Watermark > floor {
		src.Watermark = floor
	}
	return d.store.EnsureSource(ctx, src)
}

// takeOver moves source s, recorded for another account, to r's account
// unless that account keeps it (keepsSource), and reports whether it
// moved: false when kept, or when another account took it first. owners
// holds what one pass over the shared sources learned of their accounts.
func (d *Daemon) takeOver(ctx context.Context, r *accountRun, owners *ownerLooks, s store.Source) (bool, error) {
	keep, why, err := d.keepsSource(ctx, owners, s)
	if err != nil || keep {
		return false, err
	}
	moved, err := d.store.TakeSource(ctx, s.ChatID, s.Account, r.name)
	if moved {
		r.log.Info("source taken over from another account", "source", s.ChatID, "from", s.Account, "because", why)
	}
	return moved, err
}

// keepsSource reports whether source s stays with the account recorded
// for it, and if not why: that account must still list the chat, run
// (hold its lease, in this instance or another) and not have lost access
// to it. Taken from a running account that can read it, the chat would
// change hands at every start, each time read by a session that knows it
// less well.
func (d *Daemon) keepsSource(ctx context.Context, owners *ownerLooks, s store.Source) (bool, string, error) {
	if s.Access == store.AccessLost {
		return false, "it lost access to the chat", nil
	}
	listed, ok := owners.listed[s.Account]
	if !ok {
		var err error
		if listed, err = d.listedBy(ctx, s.Account); err != nil {
			return false, "", err
		}
		owners.listed = mapSet(owners.listed, s.Account, listed)
	}
	if !slices.Contains(listed, s.ChatID) {
		return false, "it does not list the chat", nil
	}
	away, ok := owners.away[s.Account]
	if !ok {
		var err error
		if away.away, away.why, err = d.accountAway(ctx, s.Account); err != nil {
			return false, away.why, err
		}
		owners.away = mapSet(owners.away, s.Account, away)
	}
	return !away.away, away.why, nil
}

// ownerLooks is what one pass over the shared sources (registerSources,
// sharedWatch.check) learned of the accounts recorded for them, each read
// once per pass rather than once per chat: the chats an account lists and
// whether it is away.
type ownerLooks struct {
	listed map[string][]tg.ChatID
	away   map[string]struct {
		away bool
		why  string
	}
}

// mapSet sets m[k] to v, making m when nil, and returns m.
func mapSet[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
}

// accountAway reports whether account does not run, and why: it is not
// logged in, or no instance has held its lease for sourceOwnerAway.
func (d *Daemon) accountAway(ctx context.Context, account string) (bool, string, error) {
	auths, err := d.store.AccountAuths(ctx)
	if err != nil {
		return false, "", err
	}
	l, err := d.store.Lease(ctx, account)
	if err != nil {
		return false, "", err
	}
	away, why := awayBy(l, auths)
	return away, why, nil
}

// whyLoggedOut is why awayBy finds an account away that is not logged in.
const whyLoggedOut = "it is not logged in"

// awayBy reports whether the account of lease l does not run, and why,
// by its lease and the accounts' login states (accountAway).
func awayBy(l store.Lease, auths []store.AccountAuth) (bool, string) {
	if slices.ContainsFunc(auths, func(x store.AccountAuth) bool { return x.Account == l.Account && !x.LoggedIn }) {
		return true, whyLoggedOut
	}
	if l.Now.Sub(l.Until) > sourceOwnerAway { // lapsed or released that long ago, or never taken
		return true, "no instance has run it for a while"
	}
	return false, ""
}

// sourceOwnerAway is how long the account recorded for a shared source may
// go unrun (its lease released or lapsed, nobody taking it) before another
// account listing the chat takes it over at its start. A restart takes
// far less: a daemon starting its accounts one after the other must not
// hand the chat to the first of them only because the one recorded has
// not started yet.
const sourceOwnerAway = 10 * time.Minute

// listedBy returns the chats the configuration makes sources of account:
// by id, by a name resolved to one before, and the supergroups basic
// groups it lists were upgraded to, whichever account reads them (as its
// run's listed chats).
func (d *Daemon) listedBy(ctx context.Context, account string) ([]tg.ChatID, error) {
	i := slices.IndexFunc(d.cfg.Accounts, func(a Account) bool { return a.Name == account })
	if i < 0 {
		return nil, nil
	}
	a := d.cfg.Accounts[i]
	listed := slices.Clone(a.Sources)
	for _, name := range a.Named {
		id, ok, err := d.store.ResolvedName(ctx, account, strings.ToLower(strings.TrimPrefix(name, "@")))
		if err != nil {
			return nil, err
		}
		if ok {
			listed = append(listed, id)
		}
	}
	upgraded, err := d.store.Upgrades(ctx)
	if err != nil {
		return nil, err
	}
	return followStoredUpgrades(listed, upgraded), nil
}
