package tg

import (
	"strings"
	"unicode/utf8"
)

// MaxTopicNameLength is the longest forum topic name, in characters, that
// Telegram keeps (TDLib's MAX_FORUM_TOPIC_TITLE_LENGTH).
const MaxTopicNameLength = 128

// CleanTopicName returns name as TDLib stores a forum topic's name
// (clean_name in td/telegram/misc.cpp): the Unicode space characters TDLib
// knows become spaces, the name is trimmed and cut to
// MaxTopicNameLength characters, runs of spaces and newlines (and
// no-break spaces) become one space, and the ends are trimmed again. A
// name of empty characters only becomes "". Topics are found by the name
// they were created with, so a name is compared only once cleaned.
func CleanTopicName(name string) string {
	name = stripEmptyCharacters(name, MaxTopicNameLength)
	var b strings.Builder
	prevSpace := false
	for _, r := range name {
		if r == ' ' || r == '\n' || r == '\u00a0' {
			if !prevSpace {
				b.WriteByte(' ')
				prevSpace = true
			}
			continue
		}
		b.WriteRune(r)
		prevSpace = false
	}
	return trimTD(b.String())
}

// tdSpaces are the characters TDLib's strip_empty_characters replaces with
// a space (U+202E, right-to-left override, is kept there).
var tdSpaces = map[rune]bool{
	'\u1680': true, '\u180E': true, '\u2000': true, '\u2001': true, '\u2002': true, '\u2003': true,
	'\u2004': true, '\u2005': true, '\u2006': true, '\u2007': true, '\u2008': true, '\u2009': true,
	'\u200A': true, '\u202F': true, '\u205F': true, '\u2800': true, '\u3000': true, '\uFFFC': true,
}

// stripEmptyCharacters is TDLib's strip_empty_characters: space-like
// characters (and the tag characters U+E0000–U+E007F) become spaces, the
// result is trimmed, cut to max characters and trimmed again, and a
// string of nothing but empty characters becomes "".
func stripEmptyCharacters(s string, max int) string {
	var b strings.Builder
	for _, r := range s {
		if tdSpaces[r] || (r >= 0xE0000 && r <= 0xE007F) {
			b.WriteByte(' ')
			continue
		}
		b.WriteRune(r)
	}
	out := trimTD(b.String())
	if utf8.RuneCountInString(out) > max {
		n := 0
		for i := range out {
			if n == max {
				out = out[:i]
				break
			}
			n++
		}
	}
	out = trimTD(out)
	for _, r := range out {
		switch r {
		case ' ', '\n', '\u200B', '\u200C', '\u200D', '\u200E', '\u200F', '\u202E', '\uFEFF', '\u00a0':
			continue
		}
		return out
	}
	return ""
}

// trimTD is TDLib's trim: it drops ASCII white space and NUL at both ends.
func trimTD(s string) string {
	return strings.Trim(s, " \t\r\n\v\f\x00")
}
