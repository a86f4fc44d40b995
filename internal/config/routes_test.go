package config

import (
	"strings"
	"testing"

	"stashd/route"
	"stashd/tg"
)

const withRoutes = `
api_id = 42
api_hash = "` + hash + `"
[[accounts]]
name = "main"
sources = ["@news_channel", { chat = "@dragon_forum", topics = [3] }]

[[routes]]
name = "big archives"
sources = ["@news_channel"]
destinations = ["@mirror_one", "-1009876543210"]
formats = ["7z", "ZIP"]
include = ["*dragon*", "re:^(?i)dnd"]
exclude = ["*sample*"]
min_size = "10MiB"
max_size = "2GiB"

[[routes]]
sources = [{ chat = "@dragon_forum", topics = [3] }]
destinations = ["@mirror_two"]
window = "22:00-06:00"
time_zone = "Europe/Berlin"
`

func TestRoutesLoad(t *testing.T) {
	t.Parallel()
	c, err := Load(write(t, withRoutes), noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	specs := c.RouteSpecs()
	if len(specs) != 2 {
		t.Fatalf("%d routes, want 2", len(specs))
	}
	s := specs[0]
	if s.Name != "big archives" || len(s.Destinations) != 2 || s.Destinations[1].ID != -1009876543210 ||
		s.Filter.MinSize != 10<<20 || s.Filter.MaxSize != 2<<30 || s.Filter.Formats[1] != "zip" {
		t.Errorf("route 0 read as %+v", s)
	}
	if !s.Filter.Pass(route.Package{Name: "Big Dragon.7z", Size: 20 << 20}) || s.Filter.Pass(route.Package{Name: "dragon sample.7z", Size: 20 << 20}) {
		t.Errorf("route 0's filter does not work as written: %+v", s.Filter)
	}
	if w := specs[1].Window; w == nil || w.String() != "22:00-06:00 Europe/Berlin" || specs[0].Window != nil {
		t.Errorf("windows read as %v and %v", specs[0].Window, w)
	}
	if specs[1].Name != "routes[1]" || specs[1].Sources[0].Topics[0] != 3 || specs[1].Sources[0].Chat.Username != "dragon_forum" {
		t.Errorf("route 1 read as %+v", specs[1])
	}
}

func TestRoutesErrorsNameTheirLines(t *testing.T) {
	t.Parallel()
	body := `
api_id = 42
api_hash = "` + hash + `"
[[accounts]]
name = "main"
sources = ["@news_channel"]

[[routes]]
sources = ["@news_channel"]
destinations = ["@mirror_one"]
include = ["re:([a-z"]

[[routes]]
sources = ["@other_chat"]
destinations = ["@news_channel"]
formats = ["exe"]
window = "18:00-6"
time_zone = "Europe/Nowhere"
`
	p := write(t, body)
	_, err := Load(p, noEnv, nil)
	if err == nil {
		t.Fatal("bad routes accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		p + ":11: routes[0].include[0]: bad regular expression",
		p + ":15: routes[1].destinations[0]: @news_channel is also a source",
		p + ":16: routes[1].formats[0]: \"exe\" is not one of",
		p + ":18: routes[1].time_zone: time zone \"Europe/Nowhere\"",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d error lines, want %d (one per problem):\n%s", len(lines), len(want), err)
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("no line starting %q in:\n%s", w, err)
		}
	}
}

func TestRoutesAndDestinationsExcludeEachOther(t *testing.T) {
	t.Parallel()
	_, err := Load(write(t, withRoutes+"\n"), func(k string) string {
		if k == "STASHD_DESTINATIONS" {
			return "@somewhere"
		}
		return ""
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "with [[routes]] every destination comes from the routes") {
		t.Fatalf("Load(routes and destinations) = %v", err)
	}
}

func TestLoadRoutesFile(t *testing.T) {
	t.Parallel()
	p := write(t, "[[routes]]\nsources = [\"-1001\"]\ndestinations = [\"-2001\"]\nmax_size = \"1MiB\"\n")
	specs, err := LoadRoutes(p)
	if err != nil || len(specs) != 1 || specs[0].Filter.MaxSize != 1<<20 {
		t.Fatalf("LoadRoutes = %+v, %v", specs, err)
	}
	p = write(t, "workers = 3\n[[routes]]\nsources = [\"-1001\"]\ndestinations = [\"-2001\"]\n")
	if _, err := LoadRoutes(p); err == nil || !strings.Contains(err.Error(), "only [[routes]]") {
		t.Fatalf("LoadRoutes(with other settings) = %v", err)
	}
}

// A destination may be a table naming a forum topic: a thread id, or
// "same"; any other value is one error line naming the route and its line.
func TestRouteDestinationTopics(t *testing.T) {
	t.Parallel()
	body := `
api_id = 42
api_hash = "` + hash + `"
[[accounts]]
name = "main"
sources = [{ chat = "@dragon_forum", topics = [3] }]

[[routes]]
sources = ["@dragon_forum"]
destinations = ["@plain", { chat = "@mirror_forum", topic = "same" }, { chat = "-1009876543210", topic = 3145728 }]
`
	c, err := Load(write(t, body), noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := c.RouteSpecs()[0]
	want := []route.Topic{{}, {Same: true}, {Thread: 3145728}}
	if len(s.Destinations) != 3 || s.Destinations[1].Username != "mirror_forum" || s.Destinations[2].ID != -1009876543210 {
		t.Fatalf("destinations read as %+v", s.Destinations)
	}
	for i, w := range want {
		rt, err := s.Resolve(func(string) (tg.ChatID, error) { return -1, nil })
		if err != nil {
			t.Fatal(err)
		}
		if got := rt.DestinationTopic(i); got != w {
			t.Errorf("destination %d: topic %v, want %v", i, got, w)
		}
	}

	bad := strings.Replace(body, `topic = "same"`, `topic = "Dragons"`, 1)
	bad = strings.Replace(bad, `topic = 3145728`, `topic = 1.5`, 1)
	p := write(t, bad)
	_, err = Load(p, noEnv, nil)
	if err == nil {
		t.Fatal("topic values other than an id or \"same\" accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	wantLines := []string{
		p + `:10: routes[0].destinations[1].topic: topic "Dragons" is neither a topic id (an integer) nor "same"`,
		p + `:10: routes[0].destinations[2].topic: topic 1.5 is neither a topic id (a positive integer) nor "same"`,
	}
	if len(lines) != len(wantLines) {
		t.Fatalf("%d error lines, want %d:\n%s", len(lines), len(wantLines), err)
	}
	for i, w := range wantLines {
		if lines[i] != w {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], w)
		}
	}
}
