package demo

import (
	"fmt"

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
