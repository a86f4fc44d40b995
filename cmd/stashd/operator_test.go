package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// search opens an existing catalogue only: a data directory without one
// is one line and stays empty (no cluster initialised there).
func TestSearchWrongDataDirCreatesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, dir, nil, "search", "--data-dir", empty, "--json", "x")
	if code == 0 {
		t.Error("search in an empty data directory: exit 0")
	}
	oneLineNaming(t, "search --data-dir EMPTY", stderr, empty)
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("search left %d entries in %s", len(entries), empty)
	}
}

// Every command prints its help on stdout and exits 0; login's mentions QR.
func TestEveryHelpOnStdout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range commands() {
		code, stdout, stderr := run(t, dir, nil, c.name, "--help")
		if code != 0 || !strings.HasPrefix(stdout, "Usage: stashd "+c.name) || stderr != "" {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", c.name, code, firstLine(stdout), stderr)
		}
		if c.name == "login" && (!strings.Contains(stdout, "--qr") || !strings.Contains(stdout, "QR code")) {
			t.Errorf("login --help does not mention the QR-code login:\n%s", stdout)
		}
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// status, deadletters, search take --config with serve's precedence: a
// flag over STASHD_*, STASHD_* over the file, the file over the default.
func TestCatalogueCommandsTakeConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fromFile := filepath.Join(dir, "from-file")
	fromEnv := filepath.Join(dir, "from-env")
	fromFlag := filepath.Join(dir, "from-flag")
	cfg := filepath.Join(dir, "stashd.toml")
	if err := os.WriteFile(cfg, []byte("data_dir = \""+fromFile+"\"\napi_id = 1\n[[accounts]]\nname = \"main\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"status"}, {"deadletters", "list"}, {"search", "x"}} {
		for _, c := range []struct {
			env  []string
			args []string
			want string
		}{
			{nil, []string{"--config", cfg}, fromFile},
			{[]string{"STASHD_CONFIG=" + cfg}, nil, fromFile},
			{[]string{"STASHD_DATA_DIR=" + fromEnv}, []string{"--config", cfg}, fromEnv},
			{[]string{"STASHD_DATA_DIR=" + fromEnv}, []string{"--config", cfg, "--data-dir", fromFlag}, fromFlag},
		} {
			args := append(append([]string(nil), cmd...), c.args...)
			code, _, stderr := run(t, dir, c.env, args...)
			if code == 0 {
				t.Errorf("%v %v: exit 0", c.env, args)
			}
			oneLineNaming(t, strings.Join(args, " "), stderr, c.want)
		}
	}
	code, _, stderr := run(t, dir, nil, "status", "--config", filepath.Join(dir, "nope.toml"))
	if code != 2 {
		t.Errorf("status with a missing --config: exit %d, want 2", code)
	}
	oneLineNaming(t, "status --config nope.toml", stderr, "nope.toml")

	// The file's database_url reaches the catalogue.
	url, _ := seededURL(t)
	withURL := filepath.Join(dir, "url.toml")
	if err := os.WriteFile(withURL, []byte("database_url = \""+url+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, dir, nil, "search", "--config", withURL, "dragon_bust")
	if code != 0 || !strings.Contains(stdout, "minis-vol1.7z") {
		t.Errorf("search --config with database_url: exit %d\n%s%s", code, stdout, stderr)
	}
}

// Help asked of stashd itself (--help, -h, help) lists the commands on
// stdout and exits 0; help COMMAND is that command's --help. Without a
// command, or with an unknown one, the usage error is on stderr, exit 2.
func TestTopLevelHelpOnStdout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, stdout, stderr := run(t, dir, nil, args...)
		if code != 0 || !strings.Contains(stdout, "Usage: stashd <command>") || !strings.Contains(stdout, "  serve ") || stderr != "" {
			t.Errorf("stashd %q: exit %d, stdout %q, stderr %q", args, code, firstLine(stdout), stderr)
		}
	}
	for _, c := range commands() {
		code, stdout, stderr := run(t, dir, nil, "help", c.name)
		if code != 0 || !strings.HasPrefix(stdout, "Usage: stashd "+c.name) || stderr != "" {
			t.Errorf("stashd help %s: exit %d, stdout %q, stderr %q", c.name, code, firstLine(stdout), stderr)
		}
	}
	for _, args := range [][]string{{}, {"nosuch"}, {"help", "nosuch"}} {
		code, stdout, stderr := run(t, dir, nil, args...)
		if code != 2 || stdout != "" || stderr == "" {
			t.Errorf("stashd %q: exit %d, stdout %q, stderr %q: want 2 and the error on stderr", args, code, firstLine(stdout), firstLine(stderr))
		}
	}
}
