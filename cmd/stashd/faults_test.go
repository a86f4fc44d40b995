package main

import (
	"path/filepath"
	"testing"
)

// The fault flags of demo and sim are probabilities: anything else is a
// usage error (exit 2) before anything starts.
func TestFaultFlagsAreProbabilities(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--fail-sends", "1.5"},
		{"--vanish-sends", "-0.1"},
		{"--fail-sends", "NaN"},
		{"--stall-downloads", "1.5"},
		{"--fail-downloads", "-0.1"},
	} {
		if rc := runDemo(args); rc != 2 {
			t.Errorf("demo %v: exit %d, want 2", args, rc)
		}
		if rc := runSim(args); rc != 2 {
			t.Errorf("sim %v: exit %d, want 2", args, rc)
		}
	}
	// Valid values parse (-h stops before anything starts).
	ok := []string{"--fail-sends", "0.05", "--vanish-sends", "0.02", "--stall-downloads", "0.05", "--fail-downloads", "0.05", "-h"}
	if rc := runDemo(ok); rc != 0 {
		t.Errorf("demo %v: exit %d, want 0", ok, rc)
	}
	if rc := runSim(ok); rc != 0 {
		t.Errorf("sim %v: exit %d, want 0", ok, rc)
	}
	if !probabilities("demo", map[string]float64{"fail-sends": 0.05, "vanish-sends": 0.02, "drop-updates": 0}) {
		t.Error("valid probabilities refused")
	}
	if rc := runDemo([]string{"--download-budget", "lots"}); rc != 2 {
		t.Errorf("demo --download-budget lots: exit %d, want 2", rc)
	}
}

// The chat fault knobs of demo and sim are probabilities: anything outside
// 0..1 is a usage error (exit 2) before anything starts.
func TestFaultKnobsOutOfRangeExit2(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--lose-access", "--errors-406", "--null-last-message", "--archived", "--protected"} {
		if rc := runDemo([]string{flag, "1.5"}); rc != 2 {
			t.Errorf("demo %s 1.5: exit %d, want 2", flag, rc)
		}
		if rc := runSim([]string{flag, "-0.1"}); rc != 2 {
			t.Errorf("sim %s -0.1: exit %d, want 2", flag, rc)
		}
	}
}

// sim's world sizes below their minimum are usage errors (exit 2), not
// quietly raised to one.
func TestSimWorldSizesBelowMinimumExit2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{{"--sources", "-1"}, {"--sources", "0"}, {"--accounts", "0"}, {"--destinations", "0"}, {"--forum-topics", "-2"}, {"--steps", "-1"}} {
		// Past the checks, writing --config-out into a missing directory
		// fails with exit 1 before anything is served.
		all := append(args, "--socket", filepath.Join(dir, "tdjson.sock"),
			"--audit-addr", "", "--config-out", filepath.Join(dir, "missing", "serve.toml"))
		if rc := runSim(all); rc != 2 {
			t.Errorf("sim %q: exit %d, want 2", args, rc)
		}
	}
}
