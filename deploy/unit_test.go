package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The shipped unit passes systemd-analyze verify where systemd is
// installed, with the binary it names stood in for.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	unit, err := os.ReadFile("stashd.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "MemoryDenyWriteExecute=yes") {
		t.Fatal("the unit no longer denies writable executable memory: update internal/pgembed's jit=off comment")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "stashd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/stashd", bin)
	path := filepath.Join(dir, "stashd.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		// Outside a booted systemd (a container) verify may complain about
		// the system itself; only lines naming the unit file count.
		if strings.Contains(l, "stashd.service") {
			t.Errorf("systemd-analyze verify: %s", l)
		}
	}
	if err != nil && strings.Contains(string(out), "stashd.service") {
		t.Errorf("systemd-analyze verify failed: %v", err)
	}
}
