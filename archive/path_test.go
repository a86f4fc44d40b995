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
