package config

import (
	"flag"
	"os"
	"strings"
	"testing"
)

const dbPassword = "Hunter2Pw"

// badDatabaseURLs are malformed database URLs holding dbPassword.
var badDatabaseURLs = []string{
	"postgres://stash:" + dbPassword + "@db.example:54x32/stashd",
	"postgres://stash:" + dbPassword + "/x@db.example:5432/stashd",
	"postgres://stash:" + dbPassword + " x@db.example/stashd",
	"host=db.example port=xx user=stash password=" + dbPassword,
}

// A malformed database_url is named in the error with its password
// masked, from the file, the environment or a flag.
func TestBadDatabaseURLHidesItsPassword(t *testing.T) {
	t.Parallel()
	for _, u := range badDatabaseURLs {
		_, err := Load(write(t, "database_url = '"+u+"'\n"+good), noEnv, nil)
		checkHidden(t, err, "database_url", u)

		env := func(k string) string {
			if k == "STASHD_DATABASE_URL" {
				return u
			}
			return ""
		}
		_, err = Load(write(t, good), env, nil)
		checkHidden(t, err, "STASHD_DATABASE_URL", u)

		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		RegisterFlags(fs)
		if err := fs.Parse([]string{"--database-url", u}); err != nil {
			t.Fatal(err)
		}
		_, err = Load(write(t, good), noEnv, fs)
		checkHidden(t, err, "--database-url", u)
	}
}

func checkHidden(t *testing.T, err error, shown, u string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%q accepted", u)
	}
	msg := err.Error()
	if !strings.Contains(msg, shown) || !strings.Contains(msg, "db.example") {
		t.Errorf("error %q: want it to name %s and show the URL's host", msg, shown)
	}
	for i := 0; i+4 <= len(dbPassword); i++ {
		if strings.Contains(msg, dbPassword[i:i+4]) {
			t.Errorf("error %q shows the password", msg)
			break
		}
	}
}

// A secret given as a flag is named in a warning, never shown; one from
// the environment, or a database URL without a password, is not warned
// about.
func TestSecretFlagsWarn(t *testing.T) {
	t.Parallel()
	const token = "console-token-0123456789"
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	RegisterFlags(fs)
	err := fs.Parse([]string{"--api-hash", hash, "--console-token", token,
		"--database-url", "postgres://stash:" + dbPassword + "@db.example/stashd", "--workers", "3",
		"--proxy", "socks5://user:" + dbPassword + "@127.0.0.1:1080"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(write(t, good), noEnv, fs)
	if err != nil {
		t.Fatal(err)
	}
	warnings := strings.Join(c.Warnings(), "\n")
	for _, name := range []string{"--api-hash", "--console-token", "--database-url", "--proxy"} {
		if !strings.Contains(warnings, name) {
			t.Errorf("no warning names %s: %q", name, warnings)
		}
	}
	if strings.Contains(warnings, "--workers") {
		t.Errorf("a setting that is no secret is warned about: %q", warnings)
	}
	for _, secret := range []string{hash, token, dbPassword} {
		if strings.Contains(warnings, secret) {
			t.Errorf("a warning shows the secret %q: %q", secret, warnings)
		}
	}

	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse([]string{"--database-url", "postgres://stash@db.example/stashd", "--proxy", "socks5://user@127.0.0.1:1080"}); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == "STASHD_CONSOLE_TOKEN" {
			return token
		}
		return ""
	}
	c, err = Load(write(t, good), env, fs)
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("warnings without a secret flag: %q", w)
	}
}

// A configuration file holding a secret warns when group or others can
// read it; a private one, or one holding no secret, does not.
func TestReadableSecretFileWarns(t *testing.T) {
	t.Parallel()
	withURL := "database_url = 'postgres://stash:" + dbPassword + "@db.example/stashd'\n" +
		strings.Replace(good, "api_hash = \""+hash+"\"\n", "", 1)
	noSecret := strings.Replace(good, "api_hash = \""+hash+"\"\n", "", 1)
	env := func(k string) string {
		if k == "STASHD_API_HASH" {
			return hash
		}
		return ""
	}
	for _, tc := range []struct {
		body string
		mode os.FileMode
		want string // a setting the warning names; "" for none
	}{
		{good, 0o644, "api_hash"},
		{good, 0o640, "api_hash"},
		{good, 0o604, "api_hash"},
		{good, 0o600, ""},
		{good, 0o400, ""},
		{withURL, 0o644, "database_url"},
		{"console_token = 'console-token-0123456789'\n" + noSecret, 0o644, "console_token"},
		{noSecret, 0o644, ""},
		{"database_url = 'postgres://stash@db.example/stashd'\n" + noSecret, 0o644, ""},
		{"proxy = 'socks5://user:" + dbPassword + "@127.0.0.1:1080'\n" + noSecret, 0o644, "proxy"},
		{"proxy = 'mtproto://ee" + dbPassword + "@127.0.0.1:443'\n" + noSecret, 0o640, "proxy"},
		{"proxy = 'socks5://user:" + dbPassword + "@127.0.0.1:1080'\n" + noSecret, 0o600, ""},
		{"proxy = 'socks5://user@127.0.0.1:1080'\n" + noSecret, 0o644, ""},
		{noSecret + "proxy = 'socks5://user:" + dbPassword + "@127.0.0.1:1080'\n", 0o644, "accounts[0].proxy"},
		{noSecret + "proxy = 'http://127.0.0.1:3128'\n", 0o644, ""},
	} {
		p := write(t, tc.body)
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p, env, nil)
		if err != nil {
			t.Fatal(err)
		}
		warnings := strings.Join(c.Warnings(), "\n")
		switch {
		case tc.want == "" && warnings != "":
			t.Errorf("mode %04o, no secret or private: warned %q", tc.mode, warnings)
		case tc.want != "" && (!strings.Contains(warnings, tc.want) || !strings.Contains(warnings, p)):
			t.Errorf("mode %04o holding %s: warnings %q do not name it and the file", tc.mode, tc.want, warnings)
		}
		if strings.Contains(warnings, dbPassword) || strings.Contains(warnings, hash) {
			t.Errorf("a warning shows a secret: %q", warnings)
		}
	}
}

// A secret written unquoted in the file does not parse, and the parser's
// message would quote it: the error names the line and the key, never the
// value, whether the setting is global or an account's.
func TestUnquotedSecretNotShownInParseError(t *testing.T) {
	t.Parallel()
	cases := []struct{ body, field, secret string }{
		{"console_token = 98765432109876543210987\n" + good, "console_token", "98765432109876543210987"},
		{"api_hash = 0123456789abcdef0123456789abcdef\n" + good, "api_hash", "0123456789abcdef0123456789abcdef"},
		{"api_hash = 1234_5678__9abc\n" + good, "api_hash", "1234_5678__9abc"},
		{"console_token = 12345678901234567890.5e\n" + good, "console_token", "12345678901234567890.5e"},
		{"database_url = postgres://stash:" + dbPassword + "@db.example/stashd\n" + good, "database_url", dbPassword},
		{"proxy = socks5://user:" + dbPassword + "@127.0.0.1:1080\n" + good, "proxy", dbPassword},
		{good + "\n[[accounts]]\nname = 'b'\nproxy = 1234567890123456789012345\n", "accounts.proxy", "1234567890123456789012345"},
	}
	for _, tc := range cases {
		p := write(t, tc.body)
		for _, err := range []error{
			func() error { _, err := Load(p, noEnv, nil); return err }(),
			DecodeFile(p, &struct{}{}),
		} {
			if err == nil {
				t.Fatalf("%q accepted", tc.body)
			}
			msg := err.Error()
			if !strings.Contains(msg, p+":") || !strings.Contains(msg, tc.field) {
				t.Errorf("error %q: want it to name %s and its line", msg, tc.field)
			}
			// The file's path is the test's temporary directory, whose
			// random digits may hold four of the secret's.
			rest := strings.ReplaceAll(msg, p, "")
			for i := 0; i+4 <= len(tc.secret); i++ {
				if strings.Contains(rest, tc.secret[i:i+4]) {
					t.Errorf("error %q shows the value of %s", msg, tc.field)
					break
				}
			}
		}
	}
	// Another setting's bad value is still shown.
	_, err := Load(write(t, "workers = 0123\n"+good), noEnv, nil)
	if err == nil || !strings.Contains(err.Error(), "0123") {
		t.Errorf("workers = 0123: error %v, want it to show the value", err)
	}
}
