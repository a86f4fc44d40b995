package tg

import (
	"strings"
	"testing"
)

func TestCleanTopicName(t *testing.T) {
	long := strings.Repeat("é", 130)
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"  two   spaces\n\nand\u00a0\u00a0nbsp  ", "two spaces and nbsp"},
		{"em\u2003space", "em space"},
		{"\u200b\u200d", ""},
		{long, strings.Repeat("é", 128)},
		{strings.Repeat("a", 127) + "   b", strings.Repeat("a", 127)},
	} {
		if got := CleanTopicName(c.in); got != c.want {
			t.Errorf("CleanTopicName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
