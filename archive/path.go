package archive

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// cleanedPath is what cleanPath made of a stored name.
type cleanedPath struct {
	path    string
	cleaned bool // invalid UTF-8 replaced or control characters removed
	cut     bool // longer than the bound, cut
	escapes bool // would escape an extraction root
	bidi    bool // holds a bidirectional formatting character
	zero    bool // holds a zero-width character
}

// cleanPath turns an entry name as stored in an archive into a string fit for
// the catalogue: invalid UTF-8 replaced with U+FFFD, control characters
// (NUL included) removed, and cut to maxBytes on a rune boundary, and says
// what it found on the way.
func cleanPath(raw string, maxBytes int) cleanedPath {
	var c cleanedPath
	var b strings.Builder
	b.Grow(min(len(raw), maxBytes+utf8.UTFMax))
	for i, r := range raw {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(raw[i:]); size == 1 {
				b.WriteRune(utf8.RuneError)
				c.cleaned = true
				continue
			}
		}
		if unicode.IsControl(r) {
			c.cleaned = true
			continue
		}
		c.bidi = c.bidi || isBidiControl(r)
		c.zero = c.zero || isZeroWidth(r)
		b.WriteRune(r)
	}
	clean := b.String()
	c.escapes = escapesRoot(clean)
	c.path = cutUTF8(clean, maxBytes)
	c.cut = len(c.path) < len(clean)
	return c
}

// isBidiControl reports whether r changes the display order of the text
// around it: the overrides, embeddings and isolates, and the marks.
func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || r == 0x200E || r == 0x200F || r == 0x061C
}

// isZeroWidth reports whether r takes no room on screen while changing the
// name: two names that look the same differ by it.
func isZeroWidth(r rune) bool {
	switch r {
	case 0x200B, 0x200C, 0x200D, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xFEFF, 0x180E, 0x00AD, 0x034F:
		return true
	}
	return false
}

// NameFlags says what a name holds that makes it show other than it is.
type NameFlags struct {
	// Control is true for control characters (newline, NUL, escape …)
	// and invalid UTF-8.
	Control bool
	// Bidi is true for bidirectional overrides, embeddings, isolates and
	// marks: "txt.exe" shown as "exe.txt".
	Bidi bool
	// ZeroWidth is true for characters that take no room: two names that
	// look the same differ.
	ZeroWidth bool
}

// Any reports whether some flag is set.
func (f NameFlags) Any() bool { return f.Control || f.Bidi || f.ZeroWidth }

// String lists the flags set, comma separated ("control, bidi").
func (f NameFlags) String() string {
	var out []string
	for _, x := range []struct {
		on   bool
		name string
	}{{f.Control, "control"}, {f.Bidi, "bidi"}, {f.ZeroWidth, "zero-width"}} {
		if x.on {
			out = append(out, x.name)
		}
	}
	return strings.Join(out, ", ")
}

// FlagName says what a name (a posted file's, or an entry's) holds that
// makes it show other than it is.
func FlagName(name string) NameFlags {
	var f NameFlags
	for i, r := range name {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(name[i:]); size == 1 {
				f.Control = true
			}
		case unicode.IsControl(r):
			f.Control = true
		case isBidiControl(r):
			f.Bidi = true
		case isZeroWidth(r):
			f.ZeroWidth = true
		}
	}
	return f
}

// Escape returns name fit for display: every character FlagName flags is
// written as \u{XXXX} (a byte of invalid UTF-8 as \x{XX}), and a backslash
// as \\, so that what is shown is what is stored and nothing reorders or
// hides the text around it.
func Escape(name string) string {
	if !FlagName(name).Any() && !strings.Contains(name, `\`) {
		return name
	}
	var b strings.Builder
	for i, r := range name {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(name[i:]); size == 1 {
				fmt.Fprintf(&b, `\x{%02X}`, name[i])
				continue
			}
			b.WriteRune(r)
		case r == '\\':
			b.WriteString(`\\`)
		case unicode.IsControl(r) || isBidiControl(r) || isZeroWidth(r):
			fmt.Fprintf(&b, `\u{%04X}`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// linkEscapes reports whether a link stored at linkPath pointing to target
// resolves outside the extraction root.
func linkEscapes(linkPath, target string) bool {
	if target == "" {
		return false
	}
	target = strings.ReplaceAll(target, `\`, "/")
	if target[0] == '/' || (len(target) >= 2 && target[1] == ':') {
		return true
	}
	joined := path.Clean(path.Dir(strings.ReplaceAll(linkPath, `\`, "/")) + "/" + target)
	return joined == ".." || strings.HasPrefix(joined, "../") || strings.HasPrefix(joined, "/")
}

// throughLink reports whether p, or a directory above it, is one of links.
func throughLink(p string, links map[string]bool) bool {
	p = strings.ReplaceAll(p, `\`, "/")
	for i := strings.IndexByte(p, '/'); i >= 0; {
		if links[p[:i]] {
			return true
		}
		j := strings.IndexByte(p[i+1:], '/')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return links[p]
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

// Nest returns e as listed under the directory dir: an album lists each of
// its archives under that archive's file name, which the poster chose and
// which is as hostile as any stored name. The joined path goes through the
// same cleaning as every entry name (control characters, invalid UTF-8,
// length, escape from the extraction root), and e keeps its own flags.
func Nest(dir string, e Entry, lim Limits) Entry {
	lim = lim.withDefaults()
	raw := e.Raw
	if raw == "" {
		raw = e.Path
	}
	raw = dir + "/" + raw
	c := cleanPath(dir+"/"+e.Path, lim.MaxPathBytes)
	e.Path = c.path
	e.Cleaned = e.Cleaned || c.cleaned
	e.Cut = e.Cut || c.cut
	e.Bidi = e.Bidi || c.bidi
	e.Unsafe = e.Unsafe || c.cleaned || c.escapes
	if e.Cleaned || e.Cut {
		e.Raw = raw[:min(len(raw), maxRawName)]
	}
	return e
}
