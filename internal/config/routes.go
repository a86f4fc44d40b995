package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"stashd/route"
)

// validateRoutes checks every [[routes]] table and returns every problem,
// one line each (*FieldError joined). Whether a chat exists, and whether
// a source with topics is a forum, is checked when the daemon starts.
func (c *Config) validateRoutes(at func(i int, key string) string) error {
	var errs []error
	bad := func(i int, key, field string, format string, args ...any) {
		errs = append(errs, &FieldError{Field: fmt.Sprintf("routes[%d].%s", i, field), Source: at(i, key), Err: fmt.Errorf(format, args...)})
	}
	var sources []route.Chat
	for _, a := range c.Accounts {
		for _, s := range a.Sources {
			if r, err := ParseChatRef(s.Chat); err == nil {
				sources = append(sources, chat(r))
			}
		}
	}
	for i, r := range c.Routes {
		if len(r.Sources) == 0 {
			bad(i, "sources", "sources", "a route needs at least one source")
		}
		for j, s := range r.Sources {
			ref, err := ParseChatRef(s.Chat)
			if err != nil {
				bad(i, "sources", fmt.Sprintf("sources[%d]", j), "%v", err)
				continue
			}
			sources = append(sources, chat(ref))
		}
		if len(r.Destinations) == 0 {
			bad(i, "destinations", "destinations", "a route needs at least one destination")
		}
		for j, f := range r.Formats {
			if !slices.Contains(route.Formats, strings.ToLower(f)) {
				bad(i, "formats", fmt.Sprintf("formats[%d]", j), "%q is not one of %s", f, strings.Join(route.Formats, ", "))
			}
		}
		for _, list := range []struct {
			key  string
			pats []string
		}{{"include", r.Include}, {"exclude", r.Exclude}} {
			for j, p := range list.pats {
				if _, err := route.ParsePattern(p); err != nil {
					bad(i, list.key, fmt.Sprintf("%s[%d]", list.key, j), "%v", err)
				}
			}
		}
		if r.Window != "" {
			if _, err := route.ParseWindow(r.Window, r.TimeZone); err != nil {
				key := "window"
				if strings.HasPrefix(err.Error(), "time zone") {
					key = "time_zone"
				}
				bad(i, key, key, "%v", err)
			}
		} else if r.TimeZone != "" {
			bad(i, "time_zone", "time_zone", "a time zone without a window: add window = \"HH:MM-HH:MM\"")
		}
		if r.MaxSize > 0 && r.MinSize > r.MaxSize {
			bad(i, "max_size", "max_size", "%d bytes is below min_size (%d bytes)", int64(r.MaxSize), int64(r.MinSize))
		}
	}
	for i, r := range c.Routes {
		for j, d := range r.Destinations {
			if _, err := d.RouteTopic(); err != nil {
				bad(i, "destinations", fmt.Sprintf("destinations[%d].topic", j), "%v", err)
			}
			ref, err := ParseChatRef(d.Chat)
			if err != nil {
				bad(i, "destinations", fmt.Sprintf("destinations[%d]", j), "%v", err)
				continue
			}
			if slices.ContainsFunc(sources, chat(ref).Same) {
				bad(i, "destinations", fmt.Sprintf("destinations[%d]", j), "%s is also a source: stashd would mirror its own deliveries", d.Chat)
			}
		}
	}
	return errors.Join(errs...)
}

func chat(r ChatRef) route.Chat { return route.Chat{ID: r.ID, Username: r.Username} }

// RouteSpecs returns the validated routes, their chats still references.
func (c *Config) RouteSpecs() []route.Spec {
	out := make([]route.Spec, 0, len(c.Routes))
	for i, r := range c.Routes {
		s := route.Spec{Name: r.Name, Filter: route.Filter{MinSize: int64(r.MinSize), MaxSize: int64(r.MaxSize)}}
		if s.Name == "" {
			s.Name = fmt.Sprintf("routes[%d]", i)
		}
		for _, src := range r.Sources {
			ref, _ := ParseChatRef(src.Chat) // validated
			s.Sources = append(s.Sources, route.SpecSource{Chat: chat(ref), Topics: src.Topics})
		}
		for j, d := range r.Destinations {
			ref, _ := ParseChatRef(d.Chat)
			s.Destinations = append(s.Destinations, chat(ref))
			if topic, _ := d.RouteTopic(); !topic.IsZero() {
				for len(s.Topics) < j {
					s.Topics = append(s.Topics, route.Topic{})
				}
				s.Topics = append(s.Topics, topic)
			}
		}
		for _, f := range r.Formats {
			s.Filter.Formats = append(s.Filter.Formats, strings.ToLower(f))
		}
		for _, p := range r.Include {
			pt, _ := route.ParsePattern(p)
			s.Filter.Include = append(s.Filter.Include, pt)
		}
		for _, p := range r.Exclude {
			pt, _ := route.ParsePattern(p)
			s.Filter.Exclude = append(s.Filter.Exclude, pt)
		}
		if r.Window != "" {
			w, _ := route.ParseWindow(r.Window, r.TimeZone)
			s.Window = &w
		}
		out = append(out, s)
	}
	return out
}

// LoadRoutes reads a file holding only [[routes]] tables (as the demo
// takes them) and validates them, naming each problem's file and line.
func LoadRoutes(path string) ([]route.Spec, error) {
	var c Config
	md, err := toml.DecodeFile(path, &c)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return nil, fmt.Errorf("%s:%d: %s", path, perr.Position.Line, oneLine(perr.Message))
		}
		return nil, fmt.Errorf("read routes: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read routes: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	if und := md.Undecoded(); len(und) > 0 {
		return nil, &FieldError{Field: und[0].String(), Source: fileLine(path, lines, und[0][len(und[0])-1]), Err: errors.New("unknown field")}
	}
	for _, k := range md.Keys() {
		if len(k) > 0 && k[0] != "routes" {
			return nil, &FieldError{Field: k.String(), Source: fileLine(path, lines, k[len(k)-1]), Err: errors.New("a routes file holds only [[routes]] tables")}
		}
	}
	if len(c.Routes) == 0 {
		return nil, fmt.Errorf("%s: no [[routes]] table", path)
	}
	if err := c.validateRoutes(func(i int, key string) string { return routeLine(path, lines, i, key) }); err != nil {
		return nil, err
	}
	return c.RouteSpecs(), nil
}
