package daemon

import (
	"context"
	"errors"
	"fmt"
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
	m, err := r.paced.GetChatMessageByDate(ctx, chat, at)
	switch {
	case errors.Is(err, tg.ErrMessageNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("find the start of source %d's history: %w", chat, err)
	}
	r.log.Info("new source catches up from its history policy", "source", chat, "none", h.None, "since", h.Since, "from_message", m.ID.ServerID())
	return m.ID.ServerID(), nil
}

// registerSources records sources the store does not know yet, with their
// kind, title and where each catches up from (histories). Known
// sources cost no call: a restart must stay cheap.
func (d *Daemon) registerSources(ctx context.Context, r *accountRun, a Account, histories map[tg.ChatID]History) error {
	known := map[tg.ChatID]bool{}
	srcs, err := d.store.Sources(ctx, a.Name)
	if err != nil {
		return err
	}
	for _, s := range srcs {
		known[s.ChatID] = true
	}
	for _, chat := range a.Sources {
		if known[chat] {
			continue
		}
		src := store.Source{ChatID: chat, Account: a.Name, Kind: tg.KindChannel}
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
		if err := d.store.EnsureSource(ctx, src); err != nil {
			return err
		}
	}
	return nil
}
