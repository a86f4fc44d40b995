package route

import (
	"fmt"
	"strings"

	"stashd/tg"
)

// Chat is a chat as the configuration names it: an id, or a public
// username resolved when an account starts.
type Chat struct {
	ID       tg.ChatID
	Username string
}

// String shows the chat as the configuration wrote it.
func (c Chat) String() string {
	if c.Username != "" {
		return "@" + c.Username
	}
	return fmt.Sprint(int64(c.ID))
}

// Same reports whether a and b name the same chat the same way (an id and
// a username for one chat are told apart only once resolved).
func (c Chat) Same(o Chat) bool {
	if c.Username != "" || o.Username != "" {
		return strings.EqualFold(c.Username, o.Username)
	}
	return c.ID == o.ID
}

// SpecSource is a route source as configured.
type SpecSource struct {
	Chat   Chat
	Topics []int64
}

// Spec is a route as configured, before its chats are resolved.
type Spec struct {
	Name         string
	Sources      []SpecSource
	Destinations []Chat
	// Topics, when not empty, holds the forum topic of each destination,
	// index for index with Destinations (a shorter list leaves the rest
	// without a topic).
	Topics []Topic
	Filter Filter
	Window *Window
}

// Resolve turns s into a Route, resolving usernames with lookup.
func (s Spec) Resolve(lookup func(username string) (tg.ChatID, error)) (Route, error) {
	id := func(c Chat) (tg.ChatID, error) {
		if c.Username == "" {
			return c.ID, nil
		}
		return lookup(c.Username)
	}
	r := Route{Name: s.Name, Filter: s.Filter, Window: s.Window, Topics: s.Topics}
	for _, src := range s.Sources {
		chat, err := id(src.Chat)
		if err != nil {
			return Route{}, fmt.Errorf("route %q: source %s: %w", s.Name, src.Chat, err)
		}
		r.Sources = append(r.Sources, Source{Chat: chat, Topics: src.Topics})
	}
	for _, d := range s.Destinations {
		chat, err := id(d)
		if err != nil {
			return Route{}, fmt.Errorf("route %q: destination %s: %w", s.Name, d, err)
		}
		r.Destinations = append(r.Destinations, chat)
	}
	return r, nil
}
