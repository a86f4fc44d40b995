package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"stashd/tg"
)

const hash = "0123456789abcdef0123456789abcdef"

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stashd.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func noEnv(string) string { return "" }

const good = `
api_id = 42
api_hash = "` + hash + `"
destinations = ["@mirror_here"]
[[accounts]]
name = "main"
sources = ["@news_channel", { chat = "https://t.me/c/1234567890/5", topics = [3, 17] }]
`

func TestExampleConfigIsValid(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		if k == "STASHD_API_HASH" {
			return hash
		}
		return ""
	}
	c, err := Load("../../deploy/stashd.example.toml", env, nil)
	if err != nil {
		t.Fatalf("the shipped example does not load: %v", err)
	}
	if len(c.Accounts) != 1 || len(c.Accounts[0].Sources) != 4 || c.Accounts[0].Sources[3].Topics[1] != 17 {
		t.Errorf("example read as %+v", c.Accounts)
	}
}

func TestLoadFillsDefaults(t *testing.T) {
	t.Parallel()
	c, err := Load(write(t, good), noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/var/lib/stashd" || c.MetricsAddr != "127.0.0.1:9464" || c.Workers != 4 ||
		c.QueueCapacity != 1024 || c.Rate != 20 || c.DrainTimeout.Duration != 20*time.Second || c.SendTimeout.Duration != 5*time.Minute ||
		c.RescanInterval.Duration != 6*time.Hour || c.SetSettle.Duration != 10*time.Second {
		t.Errorf("defaults not filled: %+v", c)
	}
	if got := c.Accounts[0].Sources[1]; got.Chat != "https://t.me/c/1234567890/5" || len(got.Topics) != 2 {
		t.Errorf("table source read as %+v", got)
	}
}

func TestPrecedenceFlagsOverEnvOverFile(t *testing.T) {
	t.Parallel()
	p := write(t, "workers = 2\nqueue_capacity = 10\nrate = 5\n"+good)
	env := func(k string) string {
		switch k {
		case "STASHD_WORKERS":
			return "3"
		case "STASHD_QUEUE_CAPACITY":
			return "11"
		}
		return ""
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse([]string{"--workers", "7"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p, env, fs)
	if err != nil {
		t.Fatal(err)
	}
	if c.Workers != 7 || c.QueueCapacity != 11 || c.Rate != 5 {
		t.Errorf("workers %d (flag 7), queue %d (env 11), rate %v (file 5)", c.Workers, c.QueueCapacity, c.Rate)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, body, field string }{
		{"unknown field", "workerz = 3\n" + good, "workerz"},
		{"bad source", strings.Replace(good, "@news_channel", "t.me/", 1), "accounts[0].sources[0]"},
		{"bad destination", strings.Replace(good, "@mirror_here", "mirror here", 1), "destinations[0]"},
		{"bad hash", strings.Replace(good, hash, "nothex", 1), "api_hash"},
		{"no api id", strings.Replace(good, "api_id = 42", "", 1), "api_id"},
		{"bad duration", "drain_timeout = \"soon\"\n" + good, "drain_timeout"},
		{"bad workers", "workers = 100000\n" + good, "workers"},
		{"duplicate account", good + "\n[[accounts]]\nname = \"main\"\nsources = [\"@abcd\"]\n", "accounts[1].name"},
		{"unknown source key", strings.Replace(good, "topics = [3, 17]", "topic = 3", 1), "topic"},
		{"stall too short", "download_stall_timeout = \"1s\"\n" + good, "download_stall_timeout"},
		{"budget too small", "download_budget = \"64KiB\"\n" + good, "download_budget"},
		{"budget not a size", "download_budget = \"lots\"\n" + good, "download_budget"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(write(t, tc.body), noEnv, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			if msg := err.Error(); !strings.Contains(msg, tc.field) || strings.Contains(msg, "\n") {
				t.Errorf("error %q does not name %q on one line", msg, tc.field)
			}
		})
	}
}

func TestEnvironmentErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		if k == "STASHD_RATE" {
			return "fast"
		}
		return ""
	}
	_, err := Load(write(t, good), env, nil)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "STASHD_RATE" {
		t.Fatalf("error = %v, want one naming STASHD_RATE", err)
	}
}

func TestParseChatRef(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want ChatRef
		ok   bool
	}{
		{"@stashd_news", ChatRef{Username: "stashd_news"}, true},
		{"https://t.me/stashd_news", ChatRef{Username: "stashd_news"}, true},
		{"t.me/stashd_news/", ChatRef{Username: "stashd_news"}, true},
		{"https://t.me/c/1234567890/42", ChatRef{ID: tg.ChatID(-1001234567890)}, true},
		{"-1001234567890", ChatRef{ID: tg.ChatID(-1001234567890)}, true},
		{"0", ChatRef{}, false},
		{"@ab", ChatRef{}, false},
		{"https://example.com/x", ChatRef{}, false},
		{"t.me/c/abc", ChatRef{}, false},
		{"", ChatRef{}, false},
	}
	for _, tc := range cases {
		got, err := ParseChatRef(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseChatRef(%q) = %+v, %v; want %+v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// serve --simulate keeps its data apart from a real daemon's.
func TestSimulateHasItsOwnDataDir(t *testing.T) {
	t.Parallel()
	c, err := LoadMode("", noEnv, nil, Simulate)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir == DefaultDataDir || c.DataDir != SimulateDataDir {
		t.Errorf("simulated data dir %q, want %q", c.DataDir, SimulateDataDir)
	}
	c, err = Load(write(t, good), noEnv, nil)
	if err != nil || c.DataDir != DefaultDataDir {
		t.Errorf("daemon data dir %q (%v), want %q", c.DataDir, err, DefaultDataDir)
	}
}

// An error names where the bad value came from: the variable or flag that
// overrode the file, or the file's line.
func TestErrorsNameTheirSource(t *testing.T) {
	t.Parallel()
	p := write(t, "workers = 0\n"+good)
	_, err := Load(p, noEnv, nil)
	if err == nil || !strings.Contains(err.Error(), p+":1") {
		t.Errorf("file: error %v, want one naming %s:1", err, p)
	}
	env := func(k string) string {
		if k == "STASHD_RATE" {
			return "0"
		}
		return ""
	}
	_, err = Load(write(t, good), env, nil)
	if err == nil || !strings.Contains(err.Error(), "STASHD_RATE") || strings.Contains(err.Error(), ".toml") {
		t.Errorf("environment: error %v, want one naming STASHD_RATE, not the file", err)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse([]string{"--metrics-addr", "nonsense"}); err != nil {
		t.Fatal(err)
	}
	_, err = Load(write(t, good), noEnv, fs)
	if err == nil || !strings.HasPrefix(err.Error(), "--metrics-addr") {
		t.Errorf("flag: error %v, want one naming --metrics-addr", err)
	}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse([]string{"--workers", "x"}); err == nil {
		t.Error("--workers x parsed")
	}
}

func TestDownloadSettings(t *testing.T) {
	t.Parallel()
	c, err := Load(write(t, good), noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.DownloadStallTimeout.Duration != 2*time.Minute || c.DownloadBudget != 4<<30 {
		t.Errorf("defaults: stall %s, budget %d", c.DownloadStallTimeout, c.DownloadBudget)
	}
	env := func(k string) string {
		switch k {
		case "STASHD_DOWNLOAD_BUDGET":
			return "512MiB"
		case "STASHD_DOWNLOAD_STALL_TIMEOUT":
			return "30s"
		}
		return ""
	}
	c, err = Load(write(t, "download_budget = \"2GB\"\n"+good), env, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.DownloadBudget != 512<<20 || c.DownloadStallTimeout.Duration != 30*time.Second {
		t.Errorf("environment: stall %s, budget %d", c.DownloadStallTimeout, c.DownloadBudget)
	}
	c, err = Load(write(t, "download_budget = \"2GB\"\n"+good), noEnv, nil)
	if err != nil || c.DownloadBudget != 2e9 {
		t.Errorf("file: budget %d, %v", c.DownloadBudget, err)
	}
}

// Serving the console beyond loopback needs a token of some length; the
// token comes from the environment like every setting.
func TestConsoleRemoteNeedsToken(t *testing.T) {
	t.Parallel()
	_, err := Load(write(t, "console_remote = true\n"+good), noEnv, nil)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "console_remote" {
		t.Fatalf("console_remote without a token: error %v, want one naming console_remote", err)
	}
	env := func(k string) string {
		if k == "STASHD_CONSOLE_TOKEN" {
			return "0123456789abcdefXYZ"
		}
		return ""
	}
	c, err := Load(write(t, "console_remote = true\nconsole_behind_proxy = true\n"+good), env, nil)
	if err != nil || !c.ConsoleRemote || c.ConsoleToken != "0123456789abcdefXYZ" {
		t.Fatalf("with STASHD_CONSOLE_TOKEN: %+v, %v", c, err)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse([]string{"--console-remote=maybe"}); err == nil || !strings.Contains(err.Error(), "console-remote") {
		t.Errorf("--console-remote=maybe: error %v, want one naming the flag", err)
	}
}

// lease_ttl and lock_ttl default to 30s, are read from the environment
// and refused outside 3s..10m, naming the variable.
func TestLeaseAndLockTTL(t *testing.T) {
	for _, tc := range []struct {
		env string
		get func(Config) time.Duration
	}{
		{"STASHD_LEASE_TTL", func(c Config) time.Duration { return c.LeaseTTL.Duration }},
		{"STASHD_LOCK_TTL", func(c Config) time.Duration { return c.LockTTL.Duration }},
	} {
		env := func(v string) func(string) string {
			return func(k string) string {
				if k == tc.env {
					return v
				}
				return ""
			}
		}
		c, err := LoadMode("", env(""), nil, Simulate)
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.get(c); got != 30*time.Second {
			t.Errorf("%s unset: %v, want 30s", tc.env, got)
		}
		if c, err = LoadMode("", env("5s"), nil, Simulate); err != nil || tc.get(c) != 5*time.Second {
			t.Errorf("%s=5s: %v, %v", tc.env, tc.get(c), err)
		}
		for _, v := range []string{"2s", "11m"} {
			if _, err := LoadMode("", env(v), nil, Simulate); err == nil || !strings.Contains(err.Error(), tc.env) {
				t.Errorf("%s=%s: %v, want an error naming the variable", tc.env, v, err)
			}
		}
	}
}

// deliver_broken defaults to false and repacks to skip; both come from the
// file, the environment and flags in that order of precedence, and a
// repacks value other than skip, deliver or link is refused naming it.
func TestVerificationSettings(t *testing.T) {
	t.Parallel()
	c, err := Load(write(t, good), noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.DeliverBroken || c.Repacks != RepacksSkip {
		t.Errorf("defaults: deliver_broken %v, repacks %q", c.DeliverBroken, c.Repacks)
	}
	c, err = Load(write(t, "deliver_broken = true\nrepacks = \"link\"\n"+good), noEnv, nil)
	if err != nil || !c.DeliverBroken || c.Repacks != RepacksLink {
		t.Errorf("file: deliver_broken %v, repacks %q, %v", c.DeliverBroken, c.Repacks, err)
	}
	env := func(k string) string {
		switch k {
		case "STASHD_DELIVER_BROKEN":
			return "false"
		case "STASHD_REPACKS":
			return "deliver"
		}
		return ""
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse([]string{"--repacks", "skip"}); err != nil {
		t.Fatal(err)
	}
	c, err = Load(write(t, "deliver_broken = true\nrepacks = \"link\"\n"+good), env, fs)
	if err != nil || c.DeliverBroken || c.Repacks != RepacksSkip {
		t.Errorf("environment and flag: deliver_broken %v, repacks %q, %v", c.DeliverBroken, c.Repacks, err)
	}
	var fe *FieldError
	if _, err := Load(write(t, "repacks = \"drop\"\n"+good), noEnv, nil); !errors.As(err, &fe) || fe.Field != "repacks" || strings.Contains(err.Error(), "\n") {
		t.Errorf("repacks = drop: error %v, want one line naming repacks", err)
	}
	if _, err := Load(write(t, good), func(k string) string {
		if k == "STASHD_DELIVER_BROKEN" {
			return "sometimes"
		}
		return ""
	}, nil); err == nil || !strings.Contains(err.Error(), "STASHD_DELIVER_BROKEN") {
		t.Errorf("STASHD_DELIVER_BROKEN=sometimes: %v, want an error naming the variable", err)
	}
}

// delivery_drain_alert defaults to 1h, is read from the environment and
// refused outside 1m..720h, naming the setting.
func TestDeliveryDrainAlert(t *testing.T) {
	c, err := LoadMode("", func(string) string { return "" }, nil, Simulate)
	if err != nil {
		t.Fatal(err)
	}
	if c.DeliveryDrainAlert.Duration != time.Hour {
		t.Errorf("default delivery_drain_alert = %v, want 1h", c.DeliveryDrainAlert.Duration)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "STASHD_DELIVERY_DRAIN_ALERT" {
				return v
			}
			return ""
		}
	}
	if c, err = LoadMode("", env("15m"), nil, Simulate); err != nil || c.DeliveryDrainAlert.Duration != 15*time.Minute {
		t.Errorf("STASHD_DELIVERY_DRAIN_ALERT=15m: %v, %v", c.DeliveryDrainAlert.Duration, err)
	}
	for _, v := range []string{"10s", "1000h", "-1h"} {
		if _, err := LoadMode("", env(v), nil, Simulate); err == nil || !strings.Contains(err.Error(), "STASHD_DELIVERY_DRAIN_ALERT") {
			t.Errorf("STASHD_DELIVERY_DRAIN_ALERT=%s: %v, want an error naming the variable", v, err)
		}
	}
}

// dead_letter_delay is bounded so that the doubled wait of every attempt
// (delay << min(attempt, 16), as ingest computes it) stays positive; a
// longer one is refused, naming the variable.
func TestDeadLetterDelayBound(t *testing.T) {
	t.Parallel()
	env := func(delay string) func(string) string {
		return func(k string) string {
			return map[string]string{"STASHD_DEAD_LETTER_DELAY": delay, "STASHD_DEAD_LETTER_ATTEMPTS": "100"}[k]
		}
	}
	c, err := Load(write(t, good), env("24h"), nil)
	if err != nil {
		t.Fatalf("STASHD_DEAD_LETTER_DELAY=24h: %v", err)
	}
	for attempt := range c.DeadLetterAttempts {
		if d := c.DeadLetterDelay.Duration << min(attempt, 16); d <= 0 || d < c.DeadLetterDelay.Duration {
			t.Fatalf("24h doubled %d times: %v", attempt, d)
		}
	}
	for _, v := range []string{"24h0m1s", "39h", "48h", "2562047h"} {
		if _, err := Load(write(t, good), env(v), nil); err == nil || !strings.Contains(err.Error(), "STASHD_DEAD_LETTER_DELAY") || !strings.Contains(err.Error(), "24h") {
			t.Errorf("STASHD_DEAD_LETTER_DELAY=%s: %v, want an error naming the variable and the bound", v, err)
		}
	}
}

// Every setting fills a field of Config, which gives its flag its type.
func TestEverySettingHasAField(t *testing.T) {
	t.Parallel()
	for _, s := range Settings {
		if settingKind(s.Name) == reflect.Invalid {
			t.Errorf("setting %s fills no field of Config", s.Name)
		}
	}
}

// A whole number too large for its type is reported as out of range, with
// the setting's range, not as a malformed number; from the environment,
// a flag or the file.
func TestOverflowingNumberIsOutOfRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value, want string }{
		{"workers", "99999999999999999999", "outside 1..256"},
		{"queue_capacity", "-99999999999999999999", "outside 1..1048576"},
		{"send_in_flight", "99999999999999999999", "outside 1..64"},
		{"dead_letter_attempts", "99999999999999999999", "outside 1..100"},
		{"api_id", "3000000000", "outside 1..2147483647"},
	} {
		env := "STASHD_" + strings.ToUpper(tc.name)
		_, err := Load(write(t, good), func(k string) string {
			if k == env {
				return tc.value
			}
			return ""
		}, nil)
		if err == nil || !strings.Contains(err.Error(), env) || !strings.Contains(err.Error(), "out of range") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want it out of range, %s", env, tc.value, err, tc.want)
		}
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		RegisterFlags(fs)
		err = fs.Parse([]string{"--" + strings.ReplaceAll(tc.name, "_", "-"), tc.value})
		if err == nil || !strings.Contains(err.Error(), "out of range") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--%s %s: %v, want it out of range, %s", tc.name, tc.value, err, tc.want)
		}
	}
	// A malformed number is still called one.
	_, err := Load(write(t, good), func(k string) string { return map[string]string{"STASHD_WORKERS": "4x"}[k] }, nil)
	if err == nil || !strings.Contains(err.Error(), "not a whole number") {
		t.Errorf("STASHD_WORKERS=4x: %v", err)
	}
}

// The intervals that pace loops have a minimum: one nanosecond would turn
// them into busy loops. The minimum itself is accepted.
func TestIntervalMinimums(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ env, min, below string }{
		{"STASHD_CATCHUP_INTERVAL", "100ms", "99ms"},
		{"STASHD_RETRY_INTERVAL", "100ms", "1ns"},
		{"STASHD_DEAD_LETTER_DELAY", "100ms", "1ms"},
		{"STASHD_RESCAN_INTERVAL", "1s", "999ms"},
		{"STASHD_SEND_TIMEOUT", "1s", "1ns"},
		{"STASHD_SET_MAX_WAIT", "1s", "1ns"},
	} {
		env := func(v string) func(string) string {
			return func(k string) string {
				if k == tc.env {
					return v
				}
				return ""
			}
		}
		if _, err := Load(write(t, good), env(tc.min), nil); err != nil {
			t.Errorf("%s=%s: %v", tc.env, tc.min, err)
		}
		if _, err := Load(write(t, good), env(tc.below), nil); err == nil || !strings.Contains(err.Error(), tc.env) || !strings.Contains(err.Error(), "minimum, "+tc.min) {
			t.Errorf("%s=%s: %v, want an error naming the variable and the minimum %s", tc.env, tc.below, err, tc.min)
		}
	}
}

// The shipped example shows every setting (docs/configuration.md says it
// does), each on a line of its own, set or commented out.
func TestExampleConfigShowsEverySetting(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/stashd.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Settings {
		re := regexp.MustCompile(`(?m)^#? ?` + regexp.QuoteMeta(s.Name) + ` = `)
		if !re.Match(b) {
			t.Errorf("deploy/stashd.example.toml does not show %s", s.Name)
		}
	}
}
