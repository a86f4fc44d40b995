package archive

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw    string
		max    int
		clean  string
		unsafe bool
	}{
		{"docs/readme.txt", 100, "docs/readme.txt", false},
		{"a/./b", 100, "a/./b", false},
		{"..", 100, "..", true},
		{"../x", 100, "../x", true},
		{"a/../b", 100, "a/../b", true}, // any ".." counts: extractors resolve names differently
		{"a/..", 100, "a/..", true},
		{"a/..b/c..", 100, "a/..b/c..", false},
		{"a/.. /b", 100, "a/.. /b", true}, // Windows drops trailing spaces and dots
		{"a/.../b", 100, "a/.../b", true},
		{"/etc/passwd", 100, "/etc/passwd", true},
		{`\\server\share\x`, 100, `\\server\share\x`, true},
		{`\x`, 100, `\x`, true},
		{`..\x`, 100, `..\x`, true},
		{`dir\file.txt`, 100, `dir\file.txt`, false}, // a Windows separator alone is fine
		{"C:/x", 100, "C:/x", true},
		{"c:x", 100, "c:x", true},
		{"1:x", 100, "1:x", false},
		{"a\x00b", 100, "ab", true},
		{"tab\there", 100, "tabhere", true},
		{"del\x7f", 100, "del", true},
		{"c1\u0085x", 100, "c1x", true},
		{"\xff\xfe", 100, "\ufffd\ufffd", true},
		{".\x00./x", 100, "../x", true},
		{"", 100, "", false},
		{"ééé", 5, "éé", false}, // cut on a rune boundary: 4 bytes, not 5
		{"abcdef", 3, "abc", false},
		{strings.Repeat("a/", 3000), 4096, strings.Repeat("a/", 2048), false},
	}
	for _, tt := range tests {
		c := cleanPath(tt.raw, tt.max)
		clean, unsafe := c.path, c.cleaned || c.escapes
		if clean != tt.clean || unsafe != tt.unsafe {
			t.Errorf("cleanPath(%q, %d) = %q, %v; want %q, %v", tt.raw, tt.max, clean, unsafe, tt.clean, tt.unsafe)
		}
		if !utf8.ValidString(clean) || len(clean) > tt.max {
			t.Errorf("cleanPath(%q) = %q: invalid or too long", tt.raw, clean)
		}
	}
}

// Posted names and entry names that show other than they are: a newline,
// a right-to-left override, a zero-width space. Escape shows each one.
func TestFlagNameAndEscape(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		flags   string
		escaped string
	}{
		{"plain.zip", "", "plain.zip"},
		{"new\nline.zip", "control", `new\u{000A}line.zip`},
		{"photo\u202egpj.exe", "bidi", `photo\u{202E}gpj.exe`},
		{"in\u200bvisible.rar", "zero-width", `in\u{200B}visible.rar`},
		{"all\x00\u2066\ufeff.7z", "control, bidi, zero-width", `all\u{0000}\u{2066}\u{FEFF}.7z`},
		{"bad\xffutf8", "control", `bad\x{FF}utf8`},
		{`back\slash`, "", `back\\slash`},
	}
	for _, c := range cases {
		if got := FlagName(c.name).String(); got != c.flags {
			t.Errorf("FlagName(%q) = %q, want %q", c.name, got, c.flags)
		}
		if got := Escape(c.name); got != c.escaped {
			t.Errorf("Escape(%q) = %q, want %q", c.name, got, c.escaped)
		}
	}
	if e := cleanPath("a\u200db", 100); !e.zero || e.path != "a\u200db" {
		t.Errorf("cleanPath of a zero-width joiner: %+v", e)
	}
}
