package main

import "testing"

// The download fault flags of demo and sim take probabilities; anything
// else is a usage error (exit 2) before any work starts.
func TestDownloadFaultFlagsAreProbabilities(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
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
	if rc := runDemo([]string{"--download-budget", "lots"}); rc != 2 {
		t.Errorf("demo --download-budget lots: exit %d, want 2", rc)
	}
}
