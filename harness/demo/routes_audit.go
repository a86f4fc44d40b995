package demo

import (
	"fmt"

	"stashd/route"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// Demo chats have public usernames, so that a routes file can name them:
// demo_source1..N (plain sources, in order), demo_forum, demo_dest1..N
// (channels) and demo_dest_forum.
func demoChatNames(gen *tgsim.Generator) map[string]tg.ChatID {
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
	n = 0
	for _, d := range gen.Destinations() {
		if d == gen.ForumDestination() {
			names["demo_dest_forum"] = d
			continue
		}
		n++
		names[fmt.Sprintf("demo_dest%d", n)] = d
	}
	return names
}

func nameDemoChats(w *tgsim.World, gen *tgsim.Generator) {
	for name, chat := range demoChatNames(gen) {
		w.SetUsername(chat, name)
	}
}

// routeTable resolves the demo's routes against its chats' usernames, the
// way the daemon does through searchPublicChat. Nil without routes.
func routeTable(gen *tgsim.Generator, specs []route.Spec) (*route.Table, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	names := demoChatNames(gen)
	var routes []route.Route
	for _, s := range specs {
		r, err := s.Resolve(func(name string) (tg.ChatID, error) {
			if id, ok := names[name]; ok {
				return id, nil
			}
			return 0, fmt.Errorf("no demo chat @%s (the demo names demo_source1..N, demo_forum, demo_dest1..N and demo_dest_forum)", name)
		})
		if err != nil {
			return nil, err
		}
		routes = append(routes, r)
	}
	return route.NewTable(nil, routes), nil
}
