package redact

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// leaks reports the first piece of secret, four characters or more, that
// msg still shows.
func leaks(msg, secret string) string {
	for n := len(secret); n >= 4; n-- {
		for i := 0; i+n <= len(secret); i++ {
			if strings.Contains(msg, secret[i:i+n]) {
				return secret[i : i+n]
			}
		}
	}
	return ""
}

const secret = "Hunter2Pw"

// connStrings are valid and malformed connection strings, each holding
// secret as a password somewhere.
var connStrings = []string{
	"postgres://stash:" + secret + "@db.example:5432/stashd",
	"postgresql://stash:" + secret + "@db.example/stashd?sslmode=require",
	"postgres://stash:" + secret + "@db.example:54x32/stashd",
	"postgres://stash:" + secret + "/x@db.example:5432/stashd",
	"postgres://stash:" + secret + "?x@db.example:5432/stashd",
	"postgres://stash:" + secret + "#x@db.example:5432/stashd",
	"postgres://stash:" + secret + "@x@db.example:5432/stashd",
	"postgres://stash:sec:" + secret + "@db.example/stashd",
	"postgres://stash:" + secret + " x@db.example:5432/stashd",
	"postgres://stash:" + secret + "%zz@db.example/stashd",
	"postgres://stash:" + url.QueryEscape(secret+"/&?") + "@db.example/stashd",
	"postgres://stash@db.example/stashd?password=" + secret + "&sslmode=bogus",
	"postgres://stash@db.example/stashd?sslmode=disable&PassWord=" + secret,
	"postgres://stash@db.example/stashd?pass%77ord=" + secret,
	"postgres://stash@db.example/stashd?sslpassword=" + secret,
	"postgres://stash@db.example/stashd?password=ab&" + secret + "&sslmode=x",
	"host=db.example user=stash password=" + secret + " port=xx",
	"host=db.example password = '" + secret + " with spaces' sslmode=bogus",
	"host=db.example PASSWORD='it\\'s " + secret + "'",
	"host=db.example password='" + secret + " unterminated",
	"host=db.example sslpassword=" + secret,
}

func TestURLHidesEveryPassword(t *testing.T) {
	t.Parallel()
	for _, c := range connStrings {
		got := URL(c)
		if l := leaks(got, secret); l != "" {
			t.Errorf("URL(%q) = %q: shows %q", c, got, l)
		}
		if !strings.Contains(got, Mask) {
			t.Errorf("URL(%q) = %q: no mask", c, got)
		}
		if !strings.Contains(got, "db.example") {
			t.Errorf("URL(%q) = %q: the host is gone too", c, got)
		}
	}
}

func TestURLKeepsTheRest(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://stash:pw@db:5432/stashd?sslmode=require": "postgres://stash:" + Mask + "@db:5432/stashd?sslmode=require",
		"postgres://stash@db/stashd?password=pw&sslmode=x":   "postgres://stash@db/stashd?password=" + Mask + "&sslmode=x",
		"postgres://db/stashd":                               "postgres://db/stashd",
		"host=db user=stash password=pw dbname=x":            "host=db user=stash password=" + Mask + " dbname=x",
		"host=db dbname=x":                                   "host=db dbname=x",
		"":                                                   "",
		"notaurl":                                            "notaurl",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

// Message hides the password however a message quotes it: the way Go's
// url package does (the whole string, %q), percent-decoded, alone.
func TestMessageHidesThePasswordHoweverQuoted(t *testing.T) {
	t.Parallel()
	for _, c := range connStrings {
		_, perr := url.Parse(c)
		for _, msg := range []string{
			fmt.Sprintf("bad url %q", c),
			fmt.Sprintf("bad url %s: %v", c, perr),
			"password " + secret + " refused",
		} {
			if got := Message(msg, c); leaks(got, secret) != "" {
				t.Errorf("Message(%q, %q) = %q: shows the password", msg, c, got)
			}
		}
	}
	if got := Message("nothing secret here", "postgres://u:pw@h/db"); got != "nothing secret here" {
		t.Errorf("a message without the password changed: %q", got)
	}
}

func TestErrorRedactsAndUnwraps(t *testing.T) {
	t.Parallel()
	sentinel := errors.New("sentinel")
	c := "postgres://stash:" + secret + "@db:bad/x"
	err := fmt.Errorf("open: %w", Error(fmt.Errorf("parse %s: %w", c, sentinel), c))
	if leaks(err.Error(), secret) != "" {
		t.Errorf("error shows the password: %v", err)
	}
	if !errors.Is(err, sentinel) {
		t.Error("errors.Is does not see through Error")
	}
	if Error(nil, c) != nil {
		t.Error("Error(nil) is not nil")
	}
}

// Pieces of a password are masked whole characters at a time, and a long
// password costs no more than its length times the message's.
func TestMessagePiecesAndLongPasswords(t *testing.T) {
	t.Parallel()
	pw := "pässwörd-Hunter2"
	c := "postgres://stash:" + pw + "/x@db/stashd"
	got := Message(`invalid port ":pässwörd-Hun" after host`, c)
	if leaks(got, pw) != "" || !utf8.ValidString(got) || !strings.Contains(got, "after host") {
		t.Errorf("Message = %q", got)
	}
	long := strings.Repeat("Hunter2Pw", 2000)
	c = "postgres://stash:" + long + "@db:bad/stashd"
	done := make(chan string, 1)
	go func() { done <- Message("cannot parse: "+c+" and "+long[:5000], c) }()
	select {
	case got := <-done:
		if leaks(got, secret) != "" {
			t.Errorf("a long password shows: %.200q", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Message takes more than 20s on a 18,000-byte password")
	}
}
