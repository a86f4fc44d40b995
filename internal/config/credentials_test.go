package config

import (
	"os"
	"path/filepath"
	"testing"
)

// Secrets handed over by systemd as credentials (LoadCredential=) are read
// from $CREDENTIALS_DIRECTORY; a STASHD_* variable still wins.
func TestCredentialsDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, v := range map[string]string{
		"api_hash":      "0123456789abcdef0123456789abcdef\n",
		"console_token": "a-token-of-some-length",
		"database_url":  "postgres://stashd:s3cret@db/stashd",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"CREDENTIALS_DIRECTORY": dir, "STASHD_CONSOLE_TOKEN": "from-the-environment-token"}
	c, err := LoadMode("", func(k string) string { return env[k] }, nil, Simulate)
	if err != nil {
		t.Fatal(err)
	}
	if c.APIHash != "0123456789abcdef0123456789abcdef" || c.DatabaseURL != "postgres://stashd:s3cret@db/stashd" {
		t.Errorf("credentials not read: api_hash %q, database_url %q", c.APIHash, c.DatabaseURL)
	}
	if c.ConsoleToken != "from-the-environment-token" {
		t.Errorf("console_token %q: the environment must win over a credential", c.ConsoleToken)
	}
	bad := map[string]string{"CREDENTIALS_DIRECTORY": dir}
	if err := os.WriteFile(filepath.Join(dir, "proxy"), []byte("gopher://x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMode("", func(k string) string { return bad[k] }, nil, Simulate); err == nil {
		t.Error("a malformed proxy credential was accepted")
	}
}
