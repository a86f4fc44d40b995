package main

import (
	"slices"
	"strings"
	"testing"

	"stashd/internal/config"
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

// A boolean setting is a switch: given bare it is true and takes no value
// from the next argument; --x=false turns it off. --help shows it without
// a type, and every other setting with its own.
func TestBooleanSettingsAreSwitches(t *testing.T) {
	fs := newFlagSet("serve", "", "")
	config.RegisterFlags(fs)
	args := []string{"--deliver-broken", "--workers", "3", "--console-behind-proxy", "--silent=false", "--console-remote=false"}
	if pos, rc := parseArgs(fs, args, 0); rc >= 0 || len(pos) != 0 {
		t.Fatalf("parseArgs(%q) = %q, %d", args, pos, rc)
	}
	c, err := config.LoadMode("", func(string) string { return "" }, fs, config.Simulate)
	if err != nil {
		t.Fatal(err)
	}
	if !c.DeliverBroken || !c.ConsoleBehindProxy || c.Silent || c.ConsoleRemote || c.Workers != 3 {
		t.Errorf("%q: deliver_broken %v, console_behind_proxy %v, silent %v, console_remote %v, workers %d",
			args, c.DeliverBroken, c.ConsoleBehindProxy, c.Silent, c.ConsoleRemote, c.Workers)
	}
	var help strings.Builder
	printUsage(&help, fs, "serve", "")
	for _, want := range []string{"--deliver-broken\n", "--silent\n", "--console-remote\n", "--console-behind-proxy\n",
		"--send-in-flight int\n", "--workers int\n", "--rate float\n", "--set-settle duration\n", "--destinations list\n", "--download-budget size\n", "--caption string\n"} {
		if !strings.Contains(help.String(), "  "+want) {
			t.Errorf("--help lacks %q:\n%s", want, help.String())
		}
	}
}
