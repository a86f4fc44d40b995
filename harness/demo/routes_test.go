package demo_test

import (
	"testing"

	"stashd/harness/demo"
	"stashd/internal/config"
)

// The shipped demo routes: every package is in each destination its routes
// require (missing counts per pair), in none other, and once.
func TestDemoRoutesFile(t *testing.T) {
	t.Parallel()
	specs, err := config.LoadRoutes("../../deploy/demo-routes.toml")
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, demo.Options{Seed: 7, Steps: 150, Rate: -1, Sources: 4, Accounts: 2, Destinations: 3, Routes: specs})
	check(t, 7, rep)
	if rep.RouteViolations != 0 || rep.Missing != 0 {
		t.Errorf("route violations %d (%v), missing %d (%v)", rep.RouteViolations, rep.RouteViolationNames, rep.Missing, rep.MissingNames)
	}
}

// The shipped topic routes: the forum's topics go to same-named topics of
// the destination forum, each created once (three source topics, at most
// three createForumTopic calls), and a copy in any other topic, General
// included, is a route violation.
func TestDemoTopicRoutesFile(t *testing.T) {
	t.Parallel()
	specs, err := config.LoadRoutes("../../deploy/demo-routes-topics.toml")
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, demo.Options{Seed: 7, Steps: 150, Rate: -1, Sources: 2, ForumTopics: 3, Accounts: 2,
		Destinations: 1, ForumDestination: true, Routes: specs})
	check(t, 7, rep)
	if rep.RouteViolations != 0 || rep.Missing != 0 {
		t.Errorf("route violations %d (%v), missing %d (%v)", rep.RouteViolations, rep.RouteViolationNames, rep.Missing, rep.MissingNames)
	}
	if n := rep.Calls["createForumTopic"]; n < 1 || n > 3 {
		t.Errorf("createForumTopic called %d times for 3 source topics, want 1 to 3", n)
	}
}
