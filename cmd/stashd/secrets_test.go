package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const cliPassword = "Hunter2Pw"

// showsPassword reports whether out shows cliPassword or a piece of it of
// four characters or more.
func showsPassword(out string) bool {
	for i := 0; i+4 <= len(cliPassword); i++ {
		if strings.Contains(out, cliPassword[i:i+4]) {
			return true
		}
	}
	return false
}

// A database URL holding a password never shows it: malformed (a config
// error) or well formed and refused (a connection error), from serve and
// from the commands that read the catalogue.
func TestDatabaseURLPasswordNeverShown(t *testing.T) {
	dir := t.TempDir()
	malformed := []string{
		"postgres://stash:" + cliPassword + "@localhost:54x32/stashd",
		"postgres://stash:" + cliPassword + "/x@localhost:5432/stashd",
		"host=localhost port=xx user=stash password=" + cliPassword,
	}
	// Nothing listens on port 1: the connection is refused.
	refused := "postgres://stash:" + cliPassword + "@localhost:1/stashd?sslmode=disable"
	cfg := filepath.Join(dir, "stashd.toml")
	type runCase struct {
		env  []string
		args []string
	}
	var cases []runCase
	for _, u := range malformed {
		cases = append(cases,
			runCase{nil, []string{"serve", "--simulate", "--database-url", u}},
			runCase{[]string{"STASHD_DATABASE_URL=" + u}, []string{"serve", "--simulate"}},
			runCase{[]string{"STASHD_DATABASE_URL=" + u}, []string{"status"}},
			runCase{nil, []string{"status", "--database-url", u}},
			runCase{nil, []string{"search", "--database-url", u, "x"}},
			runCase{nil, []string{"deadletters", "list", "--database-url", u}},
		)
	}
	cases = append(cases,
		runCase{nil, []string{"serve", "--simulate", "--metrics-addr", "off", "--data-dir", filepath.Join(dir, "data"), "--database-url", refused}},
		runCase{nil, []string{"status", "--database-url", refused}},
		runCase{nil, []string{"search", "--database-url", refused, "x"}},
	)
	if err := os.WriteFile(cfg, []byte("database_url = '"+malformed[0]+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, runCase{nil, []string{"serve", "--simulate", "--config", cfg}})
	for _, tc := range cases {
		code, stdout, stderr := run(t, dir, tc.env, tc.args...)
		if code == 0 {
			t.Errorf("stashd %q (env %q): exit 0", tc.args, tc.env)
		}
		if strings.TrimSpace(stderr) == "" {
			t.Errorf("stashd %q (env %q): nothing on stderr", tc.args, tc.env)
		}
		if showsPassword(stdout + stderr) {
			t.Errorf("stashd %q (env %q) shows the password:\n%s%s", tc.args, tc.env, stdout, stderr)
		}
	}
}

// Secrets given as flags, or kept in a configuration file others can
// read, are warned about by name and never shown.
func TestSecretFlagsAndReadableConfigWarn(t *testing.T) {
	dir := t.TempDir()
	const token = "console-token-0123456789"
	refused := "postgres://stash:" + cliPassword + "@localhost:1/stashd?sslmode=disable"
	// serve logs its warnings, then fails on the refused database.
	_, _, stderr := run(t, dir, nil, "serve", "--simulate", "--metrics-addr", "off", "--log-format", "text",
		"--data-dir", filepath.Join(dir, "data"), "--console-token", token, "--database-url", refused)
	for _, name := range []string{"--console-token", "--database-url"} {
		if !strings.Contains(stderr, "level=WARN") || !strings.Contains(stderr, name+" holds a secret") {
			t.Errorf("serve: no warning naming %s:\n%s", name, stderr)
		}
	}
	if strings.Contains(stderr, token) || showsPassword(stderr) {
		t.Errorf("serve shows a secret:\n%s", stderr)
	}
	_, _, stderr = run(t, dir, nil, "status", "--database-url", refused)
	if !strings.Contains(stderr, "warning: --database-url holds a secret") || showsPassword(stderr) {
		t.Errorf("status: no warning for --database-url, or the password shown:\n%s", stderr)
	}

	cfg := filepath.Join(dir, "stashd.toml")
	body := "console_token = '" + token + "'\nmetrics_addr = 'off'\nlog_format = 'text'\ndata_dir = '" + filepath.Join(dir, "data") +
		"'\ndatabase_url = 'postgres://stash@localhost:1/stashd?sslmode=disable'\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, stderr = run(t, dir, nil, "serve", "--simulate", "--config", cfg)
	if !strings.Contains(stderr, cfg+" holds console_token") || strings.Contains(stderr, token) {
		t.Errorf("serve with a readable config holding a token: no warning, or the token shown:\n%s", stderr)
	}
	if err := os.Chmod(cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, stderr = run(t, dir, nil, "serve", "--simulate", "--config", cfg)
	if strings.Contains(stderr, "level=WARN") {
		t.Errorf("serve with a private config warns:\n%s", stderr)
	}
}

// A secret written unquoted in the configuration file is a parse error
// that names its line and key, from serve and from the commands that read
// only the file's database settings, and never shows the value.
func TestUnquotedSecretInConfigNotShown(t *testing.T) {
	dir := t.TempDir()
	const token = "98765432109876543210987"
	cfg := filepath.Join(dir, "stashd.toml")
	if err := os.WriteFile(cfg, []byte("data_dir = 'x'\nconsole_token = "+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--simulate", "--config", cfg},
		{"status", "--config", cfg},
		{"search", "--config", cfg, "x"},
	} {
		code, stdout, stderr := run(t, dir, nil, args...)
		if code == 0 || !strings.Contains(stderr, cfg+":2") || !strings.Contains(stderr, "console_token") {
			t.Errorf("stashd %q: exit %d, stderr %q: want a failure naming %s:2 and console_token", args, code, stderr, cfg)
		}
		if strings.Contains(stdout+stderr, token[:8]) {
			t.Errorf("stashd %q shows the token:\n%s%s", args, stdout, stderr)
		}
	}
}
