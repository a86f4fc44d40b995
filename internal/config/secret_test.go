package config

import (
	"flag"
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
