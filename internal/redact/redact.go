package redact

import (
	"cmp"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Mask stands for a password in a message.
const Mask = "xxxxx"

// scheme matches the start of a URL-form connection string
// (postgres://, postgresql://); anything else is read as key=value pairs.
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// keyValue matches a password setting of the key=value form, quoted
// (an unterminated quote runs to the end) or not. The key may be
// password or sslpassword, in any case, with spaces around '='.
var keyValue = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)`)

// URL returns conn, a connection string in either PostgreSQL form, with
// every password masked: the URL's userinfo password, its password and
// sslpassword query values, or the key=value form's password settings.
// conn need not be valid: for a malformed one it masks too much rather
// than too little (a password holding an unencoded '@', '/' or '?' still
// vanishes whole).
func URL(conn string) string {
	masked, _ := redact(conn)
	return masked
}

// Message returns msg with every password of conn masked, however msg
// shows it: conn itself, or the password alone, raw, percent-encoded,
// percent-decoded or quoted. It is for messages built by code that
// quotes a connection string its own way (a parser's error).
func Message(msg, conn string) string {
	if conn == "" {
		return msg
	}
	masked, secrets := redact(conn)
	msg = strings.ReplaceAll(msg, conn, masked)
	var forms []string
	for _, s := range secrets {
		forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s), url.UserPassword("", s).String()[1:])
		if d, err := url.QueryUnescape(s); err == nil {
			forms = append(forms, d)
		}
		if d, err := url.PathUnescape(s); err == nil {
			forms = append(forms, d)
		}
		if q := strconv.Quote(s); len(q) > 2 {
			forms = append(forms, q[1:len(q)-1])
		}
	}
	// Longest first, so that a shorter form inside a longer one cannot
	// leave the rest of the longer one behind.
	slices.SortFunc(forms, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	forms = slices.Compact(forms)
	for _, f := range forms {
		if f != "" && f != Mask {
			msg = strings.ReplaceAll(msg, f, Mask)
		}
	}
	// A parser cuts a malformed string where it sees fit (Go's url
	// package quotes `invalid port ":<part of the password>"`): mask
	// every piece of a password that is still there, down to minPiece
	// bytes.
	for _, f := range forms {
		msg = maskPieces(msg, f)
	}
	return msg
}

// minPiece is the shortest piece of a password that Message masks on its
// own; shorter ones would mask ordinary words.
const minPiece = 4

// maskPieces masks in msg every run of characters that a piece of secret,
// minPiece bytes or longer, covers. It finds them with the common-substring
// table of msg and secret, row by row: len(msg)×len(secret) steps, however
// long the password.
func maskPieces(msg, secret string) string {
	if len(secret) < minPiece || len(msg) < minPiece {
		return msg
	}
	masked := make([]bool, len(msg))
	found := false
	prev, cur := make([]int, len(secret)+1), make([]int, len(secret)+1)
	for i := 1; i <= len(msg); i++ {
		for j := 1; j <= len(secret); j++ {
			if msg[i-1] != secret[j-1] {
				cur[j] = 0
				continue
			}
			cur[j] = prev[j-1] + 1
			switch {
			case cur[j] == minPiece:
				for k := i - minPiece; k < i; k++ {
					masked[k] = true
				}
				found = true
			case cur[j] > minPiece:
				masked[i-1] = true
			}
		}
		prev, cur = cur, prev
	}
	if !found {
		return msg
	}
	// Widen each run to whole characters: forward over continuation
	// bytes, then back to each run's lead byte.
	for k := 1; k < len(msg); k++ {
		if masked[k-1] && !utf8.RuneStart(msg[k]) {
			masked[k] = true
		}
	}
	for k := len(msg) - 1; k > 0; k-- {
		if masked[k] && !utf8.RuneStart(msg[k]) {
			masked[k-1] = true
		}
	}
	var b strings.Builder
	for k := 0; k < len(msg); k++ {
		switch {
		case !masked[k]:
			b.WriteByte(msg[k])
		case k == 0 || !masked[k-1]:
			b.WriteString(Mask) // one mask a run
		}
	}
	return b.String()
}

// Error returns err with Message applied to its text; errors.Is and
// errors.As still see err.
func Error(err error, conn string) error {
	if err == nil {
		return nil
	}
	return &redacted{err: err, conn: conn}
}

type redacted struct {
	err  error
	conn string
}

func (e *redacted) Error() string { return Message(e.err.Error(), e.conn) }
func (e *redacted) Unwrap() error { return e.err }

// redact returns conn masked and the passwords it masked, as written.
func redact(conn string) (string, []string) {
	var secrets []string
	if !scheme.MatchString(conn) {
		masked := keyValue.ReplaceAllStringFunc(conn, func(m string) string {
			sub := keyValue.FindStringSubmatch(m)
			if v := strings.Trim(sub[2], "'"); v != "" {
				secrets = append(secrets, sub[2], v)
			}
			return sub[1] + Mask
		})
		return masked, secrets
	}
	prefix := scheme.FindString(conn)
	rest := conn[len(prefix):]
	var b strings.Builder
	b.WriteString(prefix)
	// The userinfo runs to the last '@': a malformed password may hold
	// '@', '/', '?' or '#'. A URL whose only '@' is in its query is then
	// masked from its port on: too much, never too little.
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		user, password, hasPassword := strings.Cut(rest[:at], ":")
		b.WriteString(user)
		if hasPassword {
			b.WriteString(":" + Mask)
			if password != "" {
				secrets = append(secrets, password)
			}
		}
		b.WriteByte('@')
		rest = rest[at+1:]
	}
	path, query, hasQuery := strings.Cut(rest, "?")
	b.WriteString(path)
	if !hasQuery {
		return b.String(), secrets
	}
	b.WriteByte('?')
	// A pair without '=' after a password is taken for the rest of it
	// (an unencoded '&' in the password).
	inPassword := false
	for i, pair := range strings.Split(query, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		key, value, hasValue := strings.Cut(pair, "=")
		if !hasValue {
			if inPassword {
				b.WriteString(Mask)
				secrets = append(secrets, pair)
			} else {
				b.WriteString(pair)
			}
			continue
		}
		name, err := url.QueryUnescape(key)
		if err != nil {
			name = key
		}
		inPassword = strings.Contains(strings.ToLower(name), "password")
		if !inPassword {
			b.WriteString(pair)
			continue
		}
		b.WriteString(key + "=" + Mask)
		if value != "" {
			secrets = append(secrets, value)
		}
	}
	return b.String(), secrets
}
