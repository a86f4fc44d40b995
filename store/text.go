package store

import (
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// storable returns s as a PostgreSQL text column can hold it: invalid
// UTF-8 and NUL replaced with U+FFFD. changed says whether anything was
// replaced. A name Telegram or an archive hands over may hold either, and a
// write that fails on it would be retried for ever.
func storable(s string) (clean string, changed bool) {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s, false
	}
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				b.WriteRune(utf8.RuneError)
				continue
			}
		}
		if r == 0 {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	return b.String(), true
}

// text is storable for columns that need no raw copy (reasons, errors).
func text(s string) string {
	clean, _ := storable(s)
	return clean
}

// storableName returns a name to store, and the hex of its raw bytes when
// it had to be cleaned ("" otherwise).
func storableName(s string) (clean, rawHex string) {
	clean, changed := storable(s)
	if changed {
		rawHex = hex.EncodeToString([]byte(s))
	}
	return clean, rawHex
}
