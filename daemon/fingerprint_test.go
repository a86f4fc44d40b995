package daemon_test

import (
	"strings"
	"testing"
	"time"

	"stashd/daemon"
	"stashd/ingest"
	"stashd/route"
	"stashd/tg"
)

// An account's configuration fingerprint follows what it does, not how
// the configuration is written: the order of what is a set, and the case
// of usernames, leave it as it is; a destination, a topic, a filter, a
// window or the handling of broken archives changes it, and the summary
// diff names the item.
func TestConfigFingerprintFollowsWhatTheAccountDoes(t *testing.T) {
	t.Parallel()
	win, err := route.ParseWindow("06:00-18:00", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	base := func() (daemon.Config, daemon.Account) {
		return daemon.Config{
				Routes: []route.Spec{
					{Name: "b", Sources: []route.SpecSource{{Chat: route.Chat{ID: 1}}, {Chat: route.Chat{Username: "News"}, Topics: []int64{7, 3}}},
						Destinations: []route.Chat{{ID: 10}, {ID: 11}}, Topics: []route.Topic{{Thread: 5}}},
					{Name: "a", Sources: []route.SpecSource{{Chat: route.Chat{ID: 2}}}, Destinations: []route.Chat{{ID: 12}},
						Filter: route.Filter{Formats: []string{"zip", "rar"}, Exclude: []route.Pattern{route.MustPattern("*.part*")}}},
				},
				Ingest: ingest.Config{DeadLetterBroken: true},
			}, daemon.Account{Name: "acc", Sources: []tg.ChatID{1, 2}, Named: []string{"News"},
				History: map[string]daemon.History{"1": {Since: 24 * time.Hour}}}
	}
	cfg, acc := base()
	want := daemon.ConfigFingerprint(cfg, acc)
	if len(want.Fingerprint) != 64 || !strings.Contains(want.Summary, "route b: 1, @news topics 3+7 -> 10 topic 5, 11") {
		t.Fatalf("fingerprint %q, summary:\n%s", want.Fingerprint, want.Summary)
	}

	cfg, acc = base()
	cfg.Routes[0], cfg.Routes[1] = cfg.Routes[1], cfg.Routes[0]
	cfg.Routes[1].Sources[0], cfg.Routes[1].Sources[1] = cfg.Routes[1].Sources[1], cfg.Routes[1].Sources[0]
	cfg.Routes[1].Sources[0].Chat.Username = "news"
	cfg.Routes[1].Sources[0].Topics = []int64{3, 7}
	cfg.Routes[0].Filter.Formats = []string{"RAR", "zip"}
	acc.Sources = []tg.ChatID{2, 1}
	acc.Named = []string{"@news"}
	cfg.Logger, cfg.DataDir, cfg.Instance, cfg.SendRate = nil, "/var/lib/other", "elsewhere", 9
	if got := daemon.ConfigFingerprint(cfg, acc); got != want {
		t.Errorf("the same configuration written otherwise: fingerprint\n%s\nsummary\n%s\nwant\n%s\n%s", got.Fingerprint, got.Summary, want.Fingerprint, want.Summary)
	}

	for name, change := range map[string]struct {
		edit func(*daemon.Config, *daemon.Account)
		item string
	}{
		"destination":    {func(c *daemon.Config, _ *daemon.Account) { c.Routes[0].Destinations[1].ID = 13 }, "route b"},
		"topic":          {func(c *daemon.Config, _ *daemon.Account) { c.Routes[0].Topics[0].Same = true }, "route b"},
		"filter":         {func(c *daemon.Config, _ *daemon.Account) { c.Routes[1].Filter.MaxSize = 1 << 30 }, "route a"},
		"window":         {func(c *daemon.Config, _ *daemon.Account) { c.Routes[1].Window = &win }, "route a"},
		"source":         {func(_ *daemon.Config, a *daemon.Account) { a.Sources = append(a.Sources, 3) }, "sources"},
		"history":        {func(_ *daemon.Config, a *daemon.Account) { a.History["1"] = daemon.History{None: true} }, "history of 1"},
		"broken":         {func(c *daemon.Config, _ *daemon.Account) { c.Ingest.DeadLetterBroken = false }, "broken archives"},
		"route left out": {func(c *daemon.Config, _ *daemon.Account) { c.Routes = c.Routes[:1] }, "route a: here -"},
	} {
		cfg, acc := base()
		change.edit(&cfg, &acc)
		got := daemon.ConfigFingerprint(cfg, acc)
		if got.Fingerprint == want.Fingerprint {
			t.Errorf("%s changed: the fingerprint did not", name)
			continue
		}
		if diff := daemon.ConfigDiff(got.Summary, want.Summary); !strings.HasPrefix(diff, change.item) || strings.Contains(diff, " | ") {
			t.Errorf("%s changed: diff %q, want one item, %q", name, diff, change.item)
		}
	}
}

// Telegram usernames and route globs are compared without regard to case
// by stashd: a named source's topics and history, or a glob, written in
// another case on another instance mean the same and must not be reported
// as a difference.
func TestConfigFingerprintFoldsCaseWhereStashdDoes(t *testing.T) {
	t.Parallel()
	write := func(name, glob string) (daemon.Config, daemon.Account) {
		return daemon.Config{Routes: []route.Spec{{Name: "r", Sources: []route.SpecSource{{Chat: route.Chat{Username: name}}},
				Destinations: []route.Chat{{ID: 10}}, Filter: route.Filter{Include: []route.Pattern{route.MustPattern(glob)}}}}},
			daemon.Account{Name: "acc", Named: []string{name},
				Topics:  map[string][]int64{"@" + name: {3}},
				History: map[string]daemon.History{"@" + name: {None: true}}}
	}
	one := daemon.ConfigFingerprint(write("News", "*.ZIP"))
	other := daemon.ConfigFingerprint(write("news", "*.zip"))
	if one.Fingerprint != other.Fingerprint {
		t.Errorf("@News and @news, *.ZIP and *.zip: fingerprints differ; reported as %q", daemon.ConfigDiff(one.Summary, other.Summary))
	}
}
