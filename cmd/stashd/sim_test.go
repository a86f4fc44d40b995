package main

import (
	"os"
	"path/filepath"
	"testing"

	"stashd/internal/config"
	"stashd/sim/tgsim"
)

// The configuration stashd sim writes is one stashd serve accepts, with the
// world's accounts, sources and destinations.
func TestSimConfigIsAServeConfig(t *testing.T) {
	world := tgsim.NewWorld(tgsim.Config{Seed: 3, FilesDir: t.TempDir()})
	gen := tgsim.NewGenerator(world, tgsim.Scenario{Seed: 3, Sources: 4, ForumTopics: 2, Accounts: 2, Destinations: 1})
	w := describeWorld("var/sim/tdjson.sock", 3, gen)
	p := filepath.Join(t.TempDir(), "sim.toml")
	if err := os.WriteFile(p, []byte(serveConfig(w, "var/sim/serve")), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatalf("serve refuses the written configuration: %v\n%s", err, serveConfig(w, "var/sim/serve"))
	}
	if len(c.Accounts) != len(w.Accounts) || len(c.Destinations) != len(w.Destinations) {
		t.Errorf("accounts %d (world %d), destinations %d (world %d)", len(c.Accounts), len(w.Accounts), len(c.Destinations), len(w.Destinations))
	}
	n := 0
	for _, a := range c.Accounts {
		n += len(a.Sources)
	}
	if n != len(w.Sources) {
		t.Errorf("%d sources configured, the world has %d", n, len(w.Sources))
	}
}
