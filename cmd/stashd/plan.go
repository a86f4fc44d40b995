package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"stashd/internal/config"
	"stashd/sim/tgsim"
	"stashd/tg"
	"stashd/tg/tdlib"
)

// plan is what `stashd chats` and `stashd doctor` look at: the accounts with
// the sources each watches, the destinations, and how to reach each
// account's Telegram client.
type plan struct {
	accounts     []planAccount
	destinations []planDestination
	// dial starts a client of account; the caller closes it.
	dial func(ctx context.Context, account string) (tg.Client, error)
	// simulated: the accounts live in the Telegram simulator, not TDLib.
	simulated bool
	// proxies are the accounts' proxies (an account's own, or the global
	// one); an account without one connects directly.
	proxies map[string]tg.Proxy
}

type planAccount struct {
	name    string
	sources []config.ChatRef
}

type planDestination struct {
	ref config.ChatRef
	// topics: a route delivers into this destination's topics by name
	// (topic = "same"), so the account must be able to create them.
	topics bool
}

// refString writes a chat reference as a configuration would.
func refString(r config.ChatRef) string {
	if r.Username != "" {
		return "@" + r.Username
	}
	return fmt.Sprint(int64(r.ID))
}

// configPlan is the plan of a daemon's configuration: TDLib clients that
// must already be logged in (stashd login), never asking anything.
func configPlan(cfg config.Config, log *slog.Logger) plan {
	p := plan{proxies: map[string]tg.Proxy{}}
	p.dial = func(ctx context.Context, account string) (tg.Client, error) {
		var proxy *tg.Proxy
		if px, ok := p.proxies[account]; ok {
			proxy = &px
		}
		return tdlib.New(ctx, tdlib.Config{
			Account: account, StateDir: filepath.Join(cfg.DataDir, "accounts", account),
			APIID: cfg.APIID, APIHash: cfg.APIHash, Logger: log, Proxy: proxy,
		})
	}
	for _, a := range cfg.Accounts {
		if px, ok := cfg.ProxyOf(a); ok {
			p.proxies[a.Name] = px
		}
		pa := planAccount{name: a.Name}
		for _, s := range a.Sources {
			if r, err := config.ParseChatRef(s.Chat); err == nil {
				pa.sources = append(pa.sources, r)
			}
		}
		p.accounts = append(p.accounts, pa)
	}
	seen := map[string]int{}
	add := func(chat string, topics bool) {
		r, err := config.ParseChatRef(chat)
		if err != nil {
			return
		}
		key := strings.ToLower(refString(r))
		if i, ok := seen[key]; ok {
			p.destinations[i].topics = p.destinations[i].topics || topics
			return
		}
		seen[key] = len(p.destinations)
		p.destinations = append(p.destinations, planDestination{ref: r, topics: topics})
	}
	for _, d := range cfg.Destinations {
		add(d, false)
	}
	for _, rt := range cfg.Routes {
		for _, d := range rt.Destinations {
			t, _ := d.RouteTopic()
			add(d.Chat, t.Same)
		}
	}
	return p
}

// worldPlan is the plan of a simulated world: its generator's accounts,
// sources and destinations, and clients of the world.
func worldPlan(world *tgsim.World, accounts []string, sources map[string][]tg.ChatID, destinations []tg.ChatID, topics map[tg.ChatID]bool) plan {
	p := plan{simulated: true, proxies: map[string]tg.Proxy{}}
	p.dial = func(ctx context.Context, account string) (tg.Client, error) {
		c := world.Client(account)
		if px, ok := p.proxies[account]; ok {
			if err := c.AddProxy(ctx, px); err != nil {
				c.Close()
				return nil, fmt.Errorf("add proxy %s: %w", px, err)
			}
		}
		return c, nil
	}
	for _, a := range accounts {
		pa := planAccount{name: a}
		for _, id := range sources[a] {
			pa.sources = append(pa.sources, config.ChatRef{ID: id})
		}
		p.accounts = append(p.accounts, pa)
	}
	for _, d := range destinations {
		p.destinations = append(p.destinations, planDestination{ref: config.ChatRef{ID: d}, topics: topics[d]})
	}
	return p
}

// simulatedWorld builds the world `serve --simulate` runs with seed: the
// same accounts, sources and destinations, so that chats and doctor can
// look at it. dataDir is the simulated daemon's data directory.
func simulatedWorld(seed int64, dataDir string) (*tgsim.World, *tgsim.Generator) {
	world := tgsim.NewWorld(tgsim.Config{Seed: seed, FilesDir: filepath.Join(dataDir, "simulated-files")})
	gen := tgsim.NewGenerator(world, tgsim.Scenario{Seed: seed, Sources: 3, Accounts: 1})
	return world, gen
}

// generatorPlan is the plan of a generator's world.
func generatorPlan(world *tgsim.World, gen *tgsim.Generator) plan {
	sources := map[string][]tg.ChatID{}
	for _, s := range gen.Sources() {
		sources[s.Account] = append(sources[s.Account], s.Chat)
	}
	return worldPlan(world, gen.Accounts(), sources, gen.Destinations(), nil)
}

// roles says what stashd does with each chat of the plan: "source",
// "destination", both, or "none".
type roles struct {
	byID   map[tg.ChatID][]string
	byName map[string][]string // lower-case username
}

func (p plan) roles() roles {
	r := roles{byID: map[tg.ChatID][]string{}, byName: map[string][]string{}}
	add := func(ref config.ChatRef, role string) {
		if ref.Username != "" {
			k := strings.ToLower(ref.Username)
			if !slices.Contains(r.byName[k], role) {
				r.byName[k] = append(r.byName[k], role)
			}
			return
		}
		if !slices.Contains(r.byID[ref.ID], role) {
			r.byID[ref.ID] = append(r.byID[ref.ID], role)
		}
	}
	for _, a := range p.accounts {
		for _, s := range a.sources {
			add(s, "source")
		}
	}
	for _, d := range p.destinations {
		add(d.ref, "destination")
	}
	return r
}

// of returns the role of chat id, whose public username is username.
func (r roles) of(id tg.ChatID, username string) string {
	var out []string
	both := slices.Clone(r.byID[id])
	if username != "" {
		both = append(both, r.byName[strings.ToLower(username)]...)
	}
	for _, role := range both {
		if !slices.Contains(out, role) {
			out = append(out, role)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	if len(out) == 2 && out[0] == "destination" {
		out[0], out[1] = out[1], out[0]
	}
	return strings.Join(out, "+")
}
