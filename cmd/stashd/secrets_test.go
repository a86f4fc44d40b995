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
