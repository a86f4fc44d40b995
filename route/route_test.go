package route_test

import (
	"slices"
	"strings"
	"testing"

	"stashd/route"
	"stashd/tg"
)

func TestFilterPass(t *testing.T) {
	t.Parallel()
	p := func(name string, size int64) route.Package { return route.Package{Chat: 1, Name: name, Size: size} }
	cases := []struct {
		name   string
		filter route.Filter
		pkg    route.Package
		want   bool
	}{
		{"zero filter passes all", route.Filter{}, p("x.bin.zip", 1), true},
		{"format listed", route.Filter{Formats: []string{"7z", "zip"}}, p("Maps.7z", 1), true},
		{"format of a set's first part", route.Filter{Formats: []string{"7z"}}, p("maps.7z.001", 1), true},
		{"format of a rar set", route.Filter{Formats: []string{"rar"}}, p("maps.part1.rar", 1), true},
		{"format not listed", route.Filter{Formats: []string{"7z"}}, p("maps.zip", 1), false},
		{"below min size", route.Filter{MinSize: 10 << 20}, p("a.7z", 10<<20-1), false},
		{"at min size", route.Filter{MinSize: 10 << 20}, p("a.7z", 10<<20), true},
		{"above max size", route.Filter{MaxSize: 100}, p("a.7z", 101), false},
		{"glob ignores case", route.Filter{Include: []route.Pattern{route.MustPattern("*dragon*")}}, p("Big DRAGONS.7z", 1), true},
		{"glob misses", route.Filter{Include: []route.Pattern{route.MustPattern("*dragon*")}}, p("cats.7z", 1), false},
		{"one include of several", route.Filter{Include: []route.Pattern{route.MustPattern("*cat*"), route.MustPattern("re:^dog")}}, p("dogs.7z", 1), true},
		{"regexp is case-sensitive unless asked", route.Filter{Include: []route.Pattern{route.MustPattern("re:^dog")}}, p("Dogs.7z", 1), false},
		{"exclude wins", route.Filter{Include: []route.Pattern{route.MustPattern("*.7z")}, Exclude: []route.Pattern{route.MustPattern("re:(?i)sample")}}, p("Sample.7z", 1), false},
	}
	for _, c := range cases {
		if got := c.filter.Pass(c.pkg); got != c.want {
			t.Errorf("%s: Pass(%q, %d) = %v, want %v", c.name, c.pkg.Name, c.pkg.Size, got, c.want)
		}
	}
}

func TestParsePatternRejectsBadRegexp(t *testing.T) {
	t.Parallel()
	if _, err := route.ParsePattern("re:([a-z"); err == nil || !strings.Contains(err.Error(), "bad regular expression") {
		t.Fatalf("ParsePattern(bad regexp) error = %v", err)
	}
	if _, err := route.ParsePattern("[a-"); err == nil {
		t.Fatal("ParsePattern(bad glob) accepted it")
	}
}

func TestTableDestinations(t *testing.T) {
	t.Parallel()
	const src, forum, d1, d2, d3 = tg.ChatID(-1001), tg.ChatID(-1002), tg.ChatID(-2001), tg.ChatID(-2002), tg.ChatID(-2003)
	tbl := route.NewTable(nil, []route.Route{
		{Name: "7z", Sources: []route.Source{{Chat: src}}, Destinations: []tg.ChatID{d1, d2}, Filter: route.Filter{Formats: []string{"7z"}}},
		{Name: "dragons", Sources: []route.Source{{Chat: src}, {Chat: forum, Topics: []int64{7}}}, Destinations: []tg.ChatID{d2, d3},
			Filter: route.Filter{Include: []route.Pattern{route.MustPattern("*dragon*")}}},
	})
	cases := []struct {
		pkg  route.Package
		want []tg.ChatID
	}{
		{route.Package{Chat: src, Name: "dragon.7z"}, []tg.ChatID{d1, d2, d3}}, // d2 once for two routes
		{route.Package{Chat: src, Name: "cat.7z"}, []tg.ChatID{d1, d2}},
		{route.Package{Chat: src, Name: "cat.zip"}, nil},
		{route.Package{Chat: forum, Topic: 7, Name: "dragon.zip"}, []tg.ChatID{d2, d3}},
		{route.Package{Chat: forum, Topic: 8, Name: "dragon.zip"}, nil},
		{route.Package{Chat: -9, Name: "dragon.7z"}, nil},
	}
	for _, c := range cases {
		if got := tbl.Destinations(c.pkg); !slices.Equal(got, c.want) {
			t.Errorf("Destinations(%+v) = %v, want %v", c.pkg, got, c.want)
		}
	}
	all := route.NewTable([]tg.ChatID{d1, d2}, nil)
	if got := all.Destinations(route.Package{Chat: src, Name: "x.zip"}); !slices.Equal(got, []tg.ChatID{d1, d2}) || all.Routed() {
		t.Errorf("no routes: Destinations = %v, routed %v; want every destination", got, all.Routed())
	}
}

func TestCheckReportsEveryProblemOnItsOwnLine(t *testing.T) {
	t.Parallel()
	const src, group, d1, unknown = tg.ChatID(-1001), tg.ChatID(-1002), tg.ChatID(-2001), tg.ChatID(-9999)
	routes := []route.Route{
		{Name: "ok", Sources: []route.Source{{Chat: src}}, Destinations: []tg.ChatID{d1}},
		{Name: "bad", Sources: []route.Source{{Chat: unknown}, {Chat: group, Topics: []int64{3}}}, Destinations: []tg.ChatID{src, unknown}},
	}
	watched := func(c tg.ChatID) bool { return c == src || c == group }
	lookup := func(c tg.ChatID) (tg.ChatKind, bool) {
		switch c {
		case src, d1:
			return tg.KindChannel, true
		case group:
			return tg.KindSupergroup, true
		}
		return "", false
	}
	err := route.Check(routes, watched, lookup)
	if err == nil {
		t.Fatal("Check accepted bad routes")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, want := range []string{"source -9999: unknown chat", "is a supergroup, not a forum", "destination -1001 is also a source", "destination -9999: unknown chat"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, want) && strings.Contains(l, `route "bad"`) }) {
			t.Errorf("no line %q in:\n%s", want, err)
		}
	}
	if len(lines) != 4 {
		t.Errorf("%d lines, want 4 (one per problem):\n%s", len(lines), err)
	}
	if err := route.Check(routes[:1], watched, lookup); err != nil {
		t.Errorf("Check(good routes) = %v", err)
	}
}

// A destination topic needs a forum destination, and topic "same" a forum
// among the route's sources; each problem is one line.
func TestCheckDestinationTopics(t *testing.T) {
	t.Parallel()
	const channel, forum, destForum, destChannel = tg.ChatID(-1001), tg.ChatID(-1002), tg.ChatID(-2001), tg.ChatID(-2002)
	routes := []route.Route{
		{Name: "ok", Sources: []route.Source{{Chat: forum}}, Destinations: []tg.ChatID{destForum, destChannel},
			Topics: []route.Topic{{Same: true}}},
		{Name: "fixed ok", Sources: []route.Source{{Chat: channel}}, Destinations: []tg.ChatID{destForum}, Topics: []route.Topic{{Thread: 5 << 20}}},
		{Name: "not a forum", Sources: []route.Source{{Chat: forum}}, Destinations: []tg.ChatID{destChannel}, Topics: []route.Topic{{Thread: 5 << 20}}},
		{Name: "no source topic", Sources: []route.Source{{Chat: channel}}, Destinations: []tg.ChatID{destForum}, Topics: []route.Topic{{Same: true}}},
	}
	watched := func(c tg.ChatID) bool { return c == channel || c == forum }
	lookup := func(c tg.ChatID) (tg.ChatKind, bool) {
		switch c {
		case channel, destChannel:
			return tg.KindChannel, true
		case forum, destForum:
			return tg.KindForum, true
		}
		return "", false
	}
	if err := route.Check(routes[:2], watched, lookup); err != nil {
		t.Errorf("Check(good routes) = %v", err)
	}
	err := route.Check(routes, watched, lookup)
	if err == nil {
		t.Fatal("Check accepted topics on a channel and \"same\" without a forum source")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		`route "not a forum": destination -2002 has topic 5242880 but is a channel, not a forum`,
		`route "no source topic": destination -2001 has topic "same" but none of the route's sources is a forum`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want it to start %q", i, lines[i], w)
		}
	}
}

// The first route sending a package to a destination decides its topic.
func TestTableTopic(t *testing.T) {
	t.Parallel()
	const forum, d1, d2 = tg.ChatID(-1002), tg.ChatID(-2001), tg.ChatID(-2002)
	tbl := route.NewTable(nil, []route.Route{
		{Sources: []route.Source{{Chat: forum, Topics: []int64{7}}}, Destinations: []tg.ChatID{d1, d2}, Topics: []route.Topic{{Same: true}}},
		{Sources: []route.Source{{Chat: forum}}, Destinations: []tg.ChatID{d2, d1}, Topics: []route.Topic{{Thread: 9 << 20}}},
	})
	cases := []struct {
		pkg  route.Package
		dest tg.ChatID
		want route.Topic
	}{
		{route.Package{Chat: forum, Topic: 7}, d1, route.Topic{Same: true}},
		{route.Package{Chat: forum, Topic: 7}, d2, route.Topic{}}, // the first route gives d2 no topic
		{route.Package{Chat: forum, Topic: 8}, d2, route.Topic{Thread: 9 << 20}},
		{route.Package{Chat: forum, Topic: 8}, d1, route.Topic{}},
	}
	for _, c := range cases {
		if got := tbl.Topic(c.pkg, c.dest); got != c.want {
			t.Errorf("Topic(%+v, %d) = %v, want %v", c.pkg, c.dest, got, c.want)
		}
	}
}
