package main

import "testing"

// The failover flags of chaos are checked before anything starts.
func TestChaosFailoverFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--instances", "0"},
		{"--pauses", "-1"},
		{"--lease-ttl", "10ms"},
		{"--lease-ttl", "-3s"},
	} {
		if rc := runChaos(args); rc != 2 {
			t.Errorf("chaos %v: exit %d, want 2", args, rc)
		}
	}
	ok := []string{"--instances", "2", "--pauses", "0", "--lease-ttl", "3s", "-h"}
	if rc := runChaos(ok); rc != 0 {
		t.Errorf("chaos %v: exit %d, want 0", ok, rc)
	}
}
