package demo_test

import (
	"testing"

	"stashd/internal/config"
	"stashd/internal/demo"
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
