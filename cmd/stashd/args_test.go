package main

import (
	"slices"
	"testing"
)

// Channel ids are negative: CHAT/MSG is an argument, not a flag, before or
// after the flags and after "--".
func TestParseArgsTakesNegativeChatIDs(t *testing.T) {
	for _, args := range [][]string{
		{"retry", "-1001000000002/17", "--all"},
		{"--all", "retry", "-1001000000002/17"},
		{"retry", "--all", "--", "-1001000000002/17"},
		{"--limit", "-5", "--all", "retry", "-1001000000002/17"},
	} {
		fs := newFlagSet("deadletters", "", "")
		all := fs.Bool("all", false, "")
		fs.Int("limit", 0, "")
		pos, rc := parseArgs(fs, args, 2)
		if rc >= 0 || !slices.Equal(pos, []string{"retry", "-1001000000002/17"}) || !*all {
			t.Errorf("parseArgs(%q) = %q, %d, all %v", args, pos, rc, *all)
		}
	}
	fs := newFlagSet("deadletters", "", "")
	if _, rc := parseArgs(fs, []string{"--nope"}, 2); rc != 2 {
		t.Errorf("unknown flag: status %d, want 2", rc)
	}
}
