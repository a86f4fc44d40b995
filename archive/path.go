package archive

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// cleanPath turns an entry name as stored in an archive into a string fit for
// the catalogue: invalid UTF-8 replaced with U+FFFD, control characters
// (NUL included) removed, and cut to maxBytes on a rune boundary. unsafe is
// true when the name had to be cleaned or would escape an extraction root.
// Cutting a long name alone does not make it unsafe.
func cleanPath(raw string, maxBytes int) (clean string, unsafe bool) {
	changed := false
	var b strings.Builder
	b.Grow(min(len(raw), maxBytes+utf8.UTFMax))
	for i, r := range raw {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(raw[i:]); size == 1 {
				b.WriteRune(utf8.RuneError)
				changed = true
				continue
			}
		}
		if unicode.IsControl(r) {
			changed = true
			continue
		}
		b.WriteRune(r)
	}
	clean = b.String()
	unsafe = changed || escapesRoot(clean)
	return cutUTF8(clean, maxBytes), unsafe
}

// escapesRoot reports whether extracting a file named p could write outside
// the extraction directory on some system: an absolute path (either slash),
// a drive letter, or any ".." component. Backslashes count as separators
// because Windows extractors treat them so, and ".." counts even where it
// would stay inside, because extractors resolve names differently.
func escapesRoot(p string) bool {
	if p == "" {
		return false
	}
	if p[0] == '/' || p[0] == '\\' {
		return true
	}
	if len(p) >= 2 && p[1] == ':' && (p[0]|0x20 >= 'a' && p[0]|0x20 <= 'z') {
		return true
	}
	for comp := range strings.FieldsFuncSeq(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		// Windows drops trailing dots and spaces, so ".. " and "..." name the parent too.
		if t := strings.TrimRight(comp, ". "); t == "" && strings.Count(comp, ".") >= 2 {
			return true
		}
	}
	return false
}

// cutUTF8 cuts s to at most n bytes without splitting a rune.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
