package demo

import (
	"fmt"
	"slices"
	"sort"

	"stashd/route"
	"stashd/tg"
	"stashd/tg/tgsim"
)

// Demo chats have public usernames, so that a routes file can name them:
// demo_source1..N (plain sources, in order), demo_forum, demo_dest1..N.
func nameDemoChats(w *tgsim.World, gen *tgsim.Generator) {
	n := 0
	for _, s := range gen.Sources() {
		if s.Kind == tg.KindForum {
			w.SetUsername(s.Chat, "demo_forum")
			continue
		}
		n++
		w.SetUsername(s.Chat, fmt.Sprintf("demo_source%d", n))
	}
	for i, d := range gen.Destinations() {
		w.SetUsername(d, fmt.Sprintf("demo_dest%d", i+1))
	}
}

// routeTable resolves the demo's routes against its chats' usernames, the
// way the daemon does through searchPublicChat. Nil without routes.
func routeTable(w *tgsim.World, gen *tgsim.Generator, specs []route.Spec) (*route.Table, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	names := map[string]tg.ChatID{}
	n := 0
	for _, s := range gen.Sources() {
		if s.Kind == tg.KindForum {
			names["demo_forum"] = s.Chat
			continue
		}
		n++
		names[fmt.Sprintf("demo_source%d", n)] = s.Chat
	}
	for i, d := range gen.Destinations() {
		names[fmt.Sprintf("demo_dest%d", i+1)] = d
	}
	var routes []route.Route
	for _, s := range specs {
		r, err := s.Resolve(func(name string) (tg.ChatID, error) {
			if id, ok := names[name]; ok {
				return id, nil
			}
			return 0, fmt.Errorf("no demo chat @%s (demo_source1..%d, demo_forum, demo_dest1..%d)", name, n, len(gen.Destinations()))
		})
		if err != nil {
			return nil, err
		}
		routes = append(routes, r)
	}
	return route.NewTable(nil, routes), nil
}

// routeAudit knows, for the audit, where the routes send each published
// package. Without routes every package goes to every destination.
type routeAudit struct {
	table *route.Table
	dests []tg.ChatID
	msgs  map[tg.MessageKey]tg.Message
	// allowed holds, per package hash, the destinations any publication
	// of it is routed to.
	allowed map[[32]byte][]tg.ChatID
}

func (r *runner) newRouteAudit(truth tgsim.Truth, dests []tg.ChatID) *routeAudit {
	a := &routeAudit{table: r.routes, dests: dests, msgs: map[tg.MessageKey]tg.Message{}, allowed: map[[32]byte][]tg.ChatID{}}
	for _, s := range r.gen.Sources() {
		for _, m := range r.world.Messages(s.Chat) {
			a.msgs[m.Key()] = m
		}
	}
	for _, p := range truth.Packages {
		for _, d := range a.destinations(p) {
			if !slices.Contains(a.allowed[p.Hash], d) {
				a.allowed[p.Hash] = append(a.allowed[p.Hash], d)
			}
		}
	}
	return a
}

// destinations returns where the routes send p as its source posted it.
func (a *routeAudit) destinations(p tgsim.ExpectedPackage) []tg.ChatID {
	if !a.table.Routed() {
		return a.dests
	}
	if len(p.Parts) == 0 {
		return nil
	}
	in := route.Package{Chat: p.Parts[0].Chat, Name: p.Name}
	if m, ok := a.msgs[p.Parts[0]]; ok {
		in.Topic = m.TopicID()
	}
	for _, k := range p.Parts {
		if m, ok := a.msgs[k]; ok && m.Document != nil {
			in.Size += m.Document.File.Size
		}
	}
	return a.table.Destinations(in)
}

// required returns the indices (into the audit's destinations) the routes
// require p in.
func (a *routeAudit) required(p tgsim.ExpectedPackage) []int {
	var out []int
	for _, d := range a.destinations(p) {
		if i := slices.Index(a.dests, d); i >= 0 {
			out = append(out, i)
		}
	}
	return out
}

// violations counts the (package, destination) pairs holding a part of a
// package that no route sends there, and names them.
func (a *routeAudit) violations(rep *Report, seen []map[partRef]int, truth tgsim.Truth) {
	if !a.table.Routed() {
		return
	}
	names := map[[32]byte]string{}
	for _, p := range truth.Packages {
		if _, ok := names[p.Hash]; !ok {
			names[p.Hash] = p.Name
		}
	}
	for i, d := range a.dests {
		bad := map[[32]byte]bool{}
		for ref := range seen[i] {
			if !slices.Contains(a.allowed[ref.hash], d) {
				bad[ref.hash] = true
			}
		}
		for h := range bad {
			rep.RouteViolations++
			rep.RouteViolationNames = append(rep.RouteViolationNames, fmt.Sprintf("%s in %d: no route sends it there", names[h], d))
		}
	}
	sort.Strings(rep.RouteViolationNames)
}
