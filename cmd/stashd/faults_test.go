package main

import "testing"

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
