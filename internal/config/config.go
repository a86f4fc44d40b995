package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/jackc/pgx/v5/pgconn"

	"stashd/route"
	"stashd/tg"
)

// Config is the daemon's configuration. Load starts from the defaults below
// and every source overrides them: an explicit zero is a value, validated.
type Config struct {
	// DataDir holds each account's TDLib state and the embedded database.
	// Default /var/lib/stashd (systemd's StateDirectory).
	DataDir string `toml:"data_dir"`
	// DatabaseURL is the PostgreSQL catalogue. Empty: a private cluster
	// started from the system's PostgreSQL binaries under DataDir/postgres.
	DatabaseURL string `toml:"database_url"`
	// MetricsAddr serves /metrics, /healthz and /readyz. Default
	// 127.0.0.1:9464 (loopback only); "off" disables it.
	MetricsAddr string `toml:"metrics_addr"`
	// ConsoleToken is the bearer token of the web console served on
	// MetricsAddr under /console/. Empty: the console answers loopback
	// clients only, with no token. Set: every client must present it. A
	// secret: prefer STASHD_CONSOLE_TOKEN to the file; it is never logged.
	ConsoleToken string `toml:"console_token"`
	// ConsoleRemote serves the console to clients that are not on loopback
	// (MetricsAddr bound elsewhere). It requires ConsoleToken. Default
	// false.
	ConsoleRemote bool `toml:"console_remote"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `toml:"log_level"`
	// LogFormat is text, json or auto (text on a terminal, JSON otherwise).
	// Default auto.
	LogFormat string `toml:"log_format"`
	// APIID and APIHash identify the application to Telegram
	// (https://my.telegram.org). Required. The hash is a secret: prefer
	// STASHD_API_HASH to the file; it is never logged.
	APIID   int32  `toml:"api_id"`
	APIHash string `toml:"api_hash"`
	// Destinations receive every package: chat references as for sources.
	// Required unless Routes are given, and then not allowed: the routes
	// say where each package goes.
	Destinations []string `toml:"destinations"`
	// Routes send packages from some sources to some destinations, with
	// filters ([[routes]] tables). Empty: every package goes to every
	// destination.
	Routes []Route `toml:"routes"`
	// Workers is the number of ingest workers per account. Default 4.
	Workers int `toml:"workers"`
	// QueueCapacity bounds each account's ingest queue. Default 1024.
	QueueCapacity int `toml:"queue_capacity"`
	// Rate is each account's Telegram request rate per second. Default 20.
	Rate float64 `toml:"rate"`
	// DrainTimeout bounds the graceful drain on SIGTERM. Default 20s.
	DrainTimeout Duration `toml:"drain_timeout"`
	// SendTimeout bounds the wait for one send's outcome; a send without
	// one is reconciled by its token before it is sent again. Default 5m.
	SendTimeout Duration `toml:"send_timeout"`
	// LeaseTTL is how long an account lease lasts without renewal when
	// several instances share the database: renewed every third of it; an
	// instance that cannot renew stops the account before it lapses, and a
	// standby takes a lapsed lease over. Default 30s; 3s..10m.
	LeaseTTL Duration `toml:"lease_ttl"`
	// RescanInterval is the time between rescans. Default 6h.
	RescanInterval Duration `toml:"rescan_interval"`
	// RescanWindow is how far back a rescan walks. Default 72h.
	RescanWindow Duration `toml:"rescan_window"`
	// SetSettle is how long a multipart set must be quiet before it is
	// taken as complete. Default 10s.
	SetSettle Duration `toml:"set_settle"`
	// SetMaxWait is how long parts wait for their set before it becomes a
	// dead letter. Default 1h.
	SetMaxWait Duration `toml:"set_max_wait"`
	// CatchupInterval is how often each account's catch-up loop looks for
	// sources with something new. Default 2s.
	CatchupInterval Duration `toml:"catchup_interval"`
	// RetryInterval is how often each account looks for dead letters due
	// again. Default 30s.
	RetryInterval Duration `toml:"retry_interval"`
	// DeadLetterDelay is the first wait before a dead letter is retried;
	// it doubles with each attempt. Default 1m.
	DeadLetterDelay Duration `toml:"dead_letter_delay"`
	// DeadLetterAttempts is how many times a dead letter is tried before it
	// waits for an operator. Default 8.
	DeadLetterAttempts int `toml:"dead_letter_attempts"`
	// DownloadStallTimeout is how long a download may make no progress
	// before it is cancelled and the message retried later. Default 2m;
	// 5s..1h.
	DownloadStallTimeout Duration `toml:"download_stall_timeout"`
	// DownloadBudget bounds the bytes of downloaded archives each account
	// holds on disk at once (written "4GiB", "512MiB" or bytes); a package
	// waits until it fits, and one larger than the budget proceeds alone.
	// Default 4GiB; at least 1MiB.
	DownloadBudget ByteSize `toml:"download_budget"`
	// SendRate is each account's send budget: messages per minute, spaced
	// evenly with jitter. Default 20; 1..6000. With several accounts, each
	// delivery goes through the account that can write to its destination
	// and whose budget has the most room.
	SendRate float64 `toml:"send_rate"`
	// SendInFlight bounds each account's sends awaiting their outcome.
	// Default 3; 1..64.
	SendInFlight int `toml:"send_in_flight"`
	// BackfillRate bounds, per account, how many catalogued packages per
	// minute the backfill of a newly added route delivers. Default 30;
	// 1..6000.
	BackfillRate float64 `toml:"backfill_rate"`
	// DeliverBroken mirrors a package whose archive fails verification
	// (a damaged or cut-short archive, a set that does not chain), marked
	// broken in the catalogue and in the caption. Default false: such a
	// package is dead-lettered with the reason.
	DeliverBroken bool `toml:"deliver_broken"`
	// Repacks says what happens to a repack: a package whose entries (path,
	// size, CRC) match a catalogued package's but whose archive bytes
	// differ. "skip" links it to the first and does not deliver it,
	// "deliver" links it and delivers it too, "link" links it and sends
	// only a caption naming the package it repacks. Default "skip".
	Repacks string `toml:"repacks"`
	// Accounts are the Telegram accounts and the sources each watches. At
	// least one is required.
	Accounts []Account `toml:"accounts"`
}

// Account is one Telegram account.
type Account struct {
	// Name names the account: its state directory, logs, metrics. Letters,
	// digits, '-' and '_'.
	Name string `toml:"name"`
	// Sources are the chats this account watches.
	Sources []Source `toml:"sources"`
}

// Source is a watched chat: a chat reference, optionally limited to some
// forum topics. In TOML it is either a string ("@name") or a table
// ({ chat = "@forum", topics = [3, 17], history = "30d" }).
type Source struct {
	Chat   string  `toml:"chat"`
	Topics []int64 `toml:"topics"`
	// History is what the source catches up from when first added: "all"
	// (default), "none" (only what is posted from now on) or a stretch of
	// time back ("30d", "72h").
	History string `toml:"history"`
}

// Destination is a route's destination: a chat reference, optionally with
// a forum topic of it. In TOML it is either a string ("@mirror") or a
// table: { chat = "@mirror_forum", topic = 3145728 } delivers into that
// topic (its thread id); { chat = "@mirror_forum", topic = "same" } into
// the topic named like each package's source topic, created the first
// time (packages from outside any topic go to the General topic).
type Destination struct {
	Chat string `toml:"chat"`
	// Topic is the topic as written: nil (none), an integer thread id or
	// "same"; anything else is reported by validation.
	Topic any `toml:"topic"`
}

// UnmarshalTOML accepts a string or a table.
func (d *Destination) UnmarshalTOML(v any) error {
	return unmarshalChatRef(v, &d.Chat, func(k string, val any) error {
		if k != "topic" {
			return fmt.Errorf("unknown field %q (chat, topic)", k)
		}
		d.Topic = val
		return nil
	})
}

// unmarshalChatRef reads a chat reference written as a string, or as a
// table whose "chat" is one; field reads the table's other keys.
func unmarshalChatRef(v any, chat *string, field func(key string, val any) error) error {
	switch v := v.(type) {
	case string:
		*chat = v
		return nil
	case map[string]any:
		for k, val := range v {
			if k != "chat" {
				if err := field(k, val); err != nil {
					return err
				}
				continue
			}
			str, ok := val.(string)
			if !ok {
				return errors.New("chat must be a string")
			}
			*chat = str
		}
		return nil
	}
	return fmt.Errorf("%v is neither a chat reference nor a table", v)
}

// RouteTopic reads the destination's topic: none, a thread id, or "same".
func (d Destination) RouteTopic() (route.Topic, error) {
	switch t := d.Topic.(type) {
	case nil:
		return route.Topic{}, nil
	case int64:
		if t > 0 {
			return route.Topic{Thread: t}, nil
		}
	case string:
		if t == "same" {
			return route.Topic{Same: true}, nil
		}
		return route.Topic{}, fmt.Errorf("topic %q is neither a topic id (an integer) nor \"same\"", t)
	}
	return route.Topic{}, fmt.Errorf("topic %v is neither a topic id (a positive integer) nor \"same\"", d.Topic)
}

// ParseHistory reads a source's history policy: "" or "all" (everything),
// "none", or "Nd" days / a Go duration ("72h"). It returns none, or the
// stretch of time (zero: all).
func ParseHistory(s string) (none bool, since time.Duration, err error) {
	switch s = strings.TrimSpace(s); s {
	case "", "all":
		return false, 0, nil
	case "none":
		return true, 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err == nil && n > 0 && n <= 36500 {
			return false, time.Duration(n) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return false, d, nil
	}
	return false, 0, fmt.Errorf("history %q is not all, none or a stretch of time back (30d, 72h)", s)
}

// UnmarshalTOML accepts a string or a table.
func (s *Source) UnmarshalTOML(v any) error {
	return unmarshalChatRef(v, &s.Chat, func(k string, val any) error {
		switch k {
		case "history":
			str, ok := val.(string)
			if !ok {
				return errors.New("history must be a string (all, none, 30d)")
			}
			s.History = str
		case "topics":
			list, ok := val.([]any)
			if !ok {
				return errors.New("topics must be a list of topic ids")
			}
			for _, x := range list {
				n, ok := x.(int64)
				if !ok || n <= 0 {
					return fmt.Errorf("topics: %v is not a topic id", x)
				}
				s.Topics = append(s.Topics, n)
			}
		default:
			return fmt.Errorf("unknown field %q (chat, topics, history)", k)
		}
		return nil
	})
}

// Route is one [[routes]] table: packages of its sources (and topics) that
// pass its filters go to its destinations. A package matching several
// routes goes once to each destination.
type Route struct {
	// Name labels the route in errors and status; optional.
	Name string `toml:"name"`
	// Sources are chat references, or tables { chat = ..., topics = [...] }
	// limiting a forum to some topics. Each must be a source of an account.
	Sources []Source `toml:"sources"`
	// Destinations are chat references, or tables { chat = ..., topic = ... }
	// naming a forum topic of the destination; none may be a source.
	Destinations []Destination `toml:"destinations"`
	// Formats limit the route to these archive formats (zip, rar, 7z, tar,
	// tar.gz, tar.bz2, tar.xz, tar.zst), as the first part's name gives
	// them. Empty: any.
	Formats []string `toml:"formats"`
	// Include: when not empty, a package's name (its first part's file
	// name) must match one of these globs, or "re:"-prefixed regular
	// expressions.
	Include []string `toml:"include"`
	// Exclude: a package's name must match none of these patterns.
	Exclude []string `toml:"exclude"`
	// MinSize and MaxSize bound a package's total size ("10MiB"); zero: no
	// bound.
	MinSize ByteSize `toml:"min_size"`
	MaxSize ByteSize `toml:"max_size"`
	// Window holds the route's deliveries outside these daily hours
	// ("06:00-18:00"; "22:00-06:00" crosses midnight); they wait, never
	// dropped. Empty: any time.
	Window string `toml:"window"`
	// TimeZone is the window's IANA time zone ("Europe/Berlin"). Default
	// UTC.
	TimeZone string `toml:"time_zone"`
}

// Duration is a time.Duration written as "20s", "6h".
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration (e.g. 20s, 6h)", b)
	}
	if v < 0 {
		return fmt.Errorf("%q is negative", b)
	}
	d.Duration = v
	return nil
}

// ByteSize is a number of bytes written as "4GiB", "512MiB", "64KiB", "1GB"
// or a plain number of bytes.
type ByteSize int64

var byteUnits = []struct {
	suffix string
	scale  int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// UnmarshalText parses a size.
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	scale := int64(1)
	num := s
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, scale = strings.TrimSpace(n), u.scale
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/scale {
		return fmt.Errorf("%q is not a size (e.g. 4GiB, 512MiB, or bytes)", s)
	}
	*b = ByteSize(n * scale)
	return nil
}

// FieldError is a configuration error about one field, naming it as the
// operator wrote it: a flag ("--workers"), an environment variable
// ("STASHD_WORKERS") or a key of the file ("workers", with Source
// "stashd.toml:3").
type FieldError struct {
	Field  string
	Source string // "file:line", "environment" or "" (a flag)
	Err    error
}

func (e *FieldError) Error() string {
	if e.Source == "" {
		return fmt.Sprintf("%s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.Source, e.Field, e.Err)
}
func (e *FieldError) Unwrap() error { return e.Err }

// ChatRef is a parsed chat reference: a numeric chat id or a public
// username to resolve.
type ChatRef struct {
	ID       tg.ChatID
	Username string
}

var usernameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{3,31}$`)

// ParseChatRef reads "@name", "https://t.me/name", "t.me/name",
// "https://t.me/c/1234567890[/42]" or a numeric chat id ("-1001234567890").
func ParseChatRef(s string) (ChatRef, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n == 0 {
			return ChatRef{}, errors.New("0 is not a chat id")
		}
		return ChatRef{ID: tg.ChatID(n)}, nil
	}
	rest := s
	for _, p := range []string{"https://", "http://"} {
		rest = strings.TrimPrefix(rest, p)
	}
	for _, host := range []string{"t.me/", "telegram.me/", "www.t.me/"} {
		if after, ok := strings.CutPrefix(rest, host); ok {
			parts := strings.Split(strings.Trim(after, "/"), "/")
			if len(parts) >= 2 && parts[0] == "c" {
				n, err := strconv.ParseInt(parts[1], 10, 64)
				if err != nil || n <= 0 {
					return ChatRef{}, fmt.Errorf("%q: t.me/c/ needs a numeric channel id", s)
				}
				id, _ := strconv.ParseInt("-100"+parts[1], 10, 64)
				return ChatRef{ID: tg.ChatID(id)}, nil
			}
			if usernameRE.MatchString(parts[0]) {
				return ChatRef{Username: parts[0]}, nil
			}
			return ChatRef{}, fmt.Errorf("%q is not a t.me link to a public chat", s)
		}
	}
	if name, ok := strings.CutPrefix(s, "@"); ok && usernameRE.MatchString(name) {
		return ChatRef{Username: name}, nil
	}
	return ChatRef{}, fmt.Errorf("%q is not a chat reference: use @username, https://t.me/username, https://t.me/c/ID or a numeric chat id", s)
}

var accountRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Mode says what a configuration is for.
type Mode int

const (
	// Daemon runs real Telegram accounts: credentials, accounts and
	// destinations are required.
	Daemon Mode = iota
	// Simulate runs the daemon on the built-in simulator, which supplies
	// accounts and destinations; its data lives apart from a real
	// daemon's (SimulateDataDir).
	Simulate
	// Login logs one account in: credentials and accounts are required,
	// destinations are not.
	Login
)

// DefaultDataDir is the data directory of a real daemon (systemd's
// StateDirectory); SimulateDataDir that of serve --simulate, so that
// simulated packages never land in a real catalogue.
const (
	DefaultDataDir  = "/var/lib/stashd"
	SimulateDataDir = "var/simulate"
)

// defaults returns the configuration every source then overrides. An
// explicit zero is therefore a value, validated as such.
func defaults(mode Mode) Config {
	c := Config{
		DataDir: DefaultDataDir, MetricsAddr: "127.0.0.1:9464", LogLevel: "info", LogFormat: "auto",
		Workers: 4, QueueCapacity: 1024, Rate: 20, BackfillRate: 30, SendRate: 20, SendInFlight: 3,
		DrainTimeout: Duration{20 * time.Second}, SendTimeout: Duration{5 * time.Minute}, LeaseTTL: Duration{30 * time.Second},
		DownloadStallTimeout: Duration{2 * time.Minute}, DownloadBudget: 4 << 30, RescanInterval: Duration{6 * time.Hour},
		RescanWindow: Duration{72 * time.Hour}, SetSettle: Duration{10 * time.Second}, SetMaxWait: Duration{time.Hour}, Repacks: RepacksSkip,
		CatchupInterval: Duration{2 * time.Second}, RetryInterval: Duration{30 * time.Second},
		DeadLetterDelay: Duration{time.Minute}, DeadLetterAttempts: 8,
	}
	if mode == Simulate {
		c.DataDir = SimulateDataDir
	}
	return c
}

// Validate checks every field of a daemon's configuration and returns the
// first problem as a *FieldError. origin labels where it came from.
func (c *Config) Validate(origin string) error {
	return c.validate(Daemon, func(string) (string, string) { return "", origin }, func(int, string) string { return origin })
}

// validate checks the fields the mode needs. where names a field's origin:
// the name to show and its source (see FieldError).
//
// routeAt names the source of key in the i-th [[routes]] table.
func (c *Config) validate(mode Mode, where func(setting string) (field, source string), routeAt func(i int, key string) string) error {
	bad := func(field string, format string, args ...any) error {
		setting, _, _ := strings.Cut(field, "[")
		shown, src := where(setting)
		if shown == "" || shown == setting {
			shown = field
		}
		return &FieldError{Field: shown, Source: src, Err: fmt.Errorf(format, args...)}
	}
	if mode == Login {
		return c.validateLogin(bad)
	}
	if c.DataDir == "" {
		return bad("data_dir", "must not be empty")
	}
	if c.DatabaseURL != "" {
		if _, err := pgconn.ParseConfig(c.DatabaseURL); err != nil {
			return bad("database_url", "%q is not a PostgreSQL URL (postgres://user@host:5432/db or \"host=... dbname=...\")", c.DatabaseURL)
		}
	}
	if c.MetricsAddr != "off" {
		host, port, err := net.SplitHostPort(c.MetricsAddr)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, " /") {
			return bad("metrics_addr", "%q is not host:port (e.g. 127.0.0.1:9464) or off", c.MetricsAddr)
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return bad("log_level", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	switch c.LogFormat {
	case "auto", "text", "json":
	default:
		return bad("log_format", "%q is not one of auto, text, json", c.LogFormat)
	}
	if c.ConsoleRemote && len(c.ConsoleToken) < 16 {
		return bad("console_remote", "serving the console beyond loopback needs console_token of 16 characters or more (or STASHD_CONSOLE_TOKEN)")
	}
	if err := c.validateTuning(bad); err != nil {
		return err
	}
	if err := c.validateRoutes(routeAt); err != nil || mode == Simulate {
		return err
	}
	if err := c.validateCredentials(bad); err != nil {
		return err
	}
	switch {
	case len(c.Destinations) == 0 && len(c.Routes) == 0:
		return bad("destinations", "at least one destination chat (or a [[routes]] table) is required")
	case len(c.Destinations) > 0 && len(c.Routes) > 0:
		return bad("destinations", "with [[routes]] every destination comes from the routes: remove destinations")
	}
	for i, d := range c.Destinations {
		if _, err := ParseChatRef(d); err != nil {
			return bad(fmt.Sprintf("destinations[%d]", i), "%v", err)
		}
	}
	return c.validateAccounts(bad)
}

type badFunc = func(field, format string, args ...any) error

func (c *Config) validateLogin(bad badFunc) error {
	if c.DataDir == "" {
		return bad("data_dir", "must not be empty")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return bad("log_level", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	switch c.LogFormat {
	case "auto", "text", "json":
	default:
		return bad("log_format", "%q is not one of auto, text, json", c.LogFormat)
	}
	if err := c.validateCredentials(bad); err != nil {
		return err
	}
	return c.validateAccounts(bad)
}

func (c *Config) validateCredentials(bad badFunc) error {
	if c.APIID <= 0 {
		return bad("api_id", "required: the api_id of your application from https://my.telegram.org (or STASHD_API_ID)")
	}
	if c.APIHash == "" {
		return bad("api_hash", "required: the api_hash from https://my.telegram.org (or STASHD_API_HASH)")
	}
	if !regexp.MustCompile(`^[0-9a-fA-F]{32}$`).MatchString(c.APIHash) {
		return bad("api_hash", "must be the 32 hexadecimal digits my.telegram.org shows")
	}
	return nil
}

func (c *Config) validateAccounts(bad badFunc) error {
	if len(c.Accounts) == 0 {
		return bad("accounts", "at least one [[accounts]] entry is required")
	}
	names := map[string]bool{}
	for i, a := range c.Accounts {
		if !accountRE.MatchString(a.Name) {
			return bad(fmt.Sprintf("accounts[%d].name", i), "%q must be 1-64 letters, digits, '-' or '_'", a.Name)
		}
		if names[a.Name] {
			return bad(fmt.Sprintf("accounts[%d].name", i), "%q is used twice", a.Name)
		}
		names[a.Name] = true
		if len(a.Sources) == 0 {
			return bad(fmt.Sprintf("accounts[%d].sources", i), "account %q watches no source", a.Name)
		}
		for j, s := range a.Sources {
			if _, err := ParseChatRef(s.Chat); err != nil {
				return bad(fmt.Sprintf("accounts[%d].sources[%d]", i, j), "%v", err)
			}
			if _, _, err := ParseHistory(s.History); err != nil {
				return bad(fmt.Sprintf("accounts[%d].sources[%d]", i, j), "%v", err)
			}
		}
	}
	return nil
}

// Account returns the account named name, or an error listing the
// configured ones.
func (c *Config) Account(name string) (Account, error) {
	var names []string
	for _, a := range c.Accounts {
		if a.Name == name {
			return a, nil
		}
		names = append(names, a.Name)
	}
	if len(names) == 0 {
		return Account{}, fmt.Errorf("%q: the configuration has no [[accounts]]", name)
	}
	return Account{}, fmt.Errorf("%q is not an account of the configuration (%s)", name, strings.Join(names, ", "))
}

func (c *Config) validateTuning(bad badFunc) error {
	if c.Workers < 1 || c.Workers > 256 {
		return bad("workers", "%d is outside 1..256", c.Workers)
	}
	if c.QueueCapacity < 1 || c.QueueCapacity > 1<<20 {
		return bad("queue_capacity", "%d is outside 1..1048576", c.QueueCapacity)
	}
	if c.SendRate < 1 || c.SendRate > 6000 {
		return bad("send_rate", "%v is outside 1..6000 messages per minute", c.SendRate)
	}
	if c.SendInFlight < 1 || c.SendInFlight > 64 {
		return bad("send_in_flight", "%d is outside 1..64", c.SendInFlight)
	}
	if c.BackfillRate < 1 || c.BackfillRate > 6000 {
		return bad("backfill_rate", "%v is outside 1..6000 packages per minute", c.BackfillRate)
	}
	if c.Rate <= 0 || c.Rate > 1000 {
		return bad("rate", "%v is outside (0, 1000] requests per second", c.Rate)
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"drain_timeout", c.DrainTimeout}, {"rescan_interval", c.RescanInterval}, {"rescan_window", c.RescanWindow}, {"set_settle", c.SetSettle}, {"set_max_wait", c.SetMaxWait}, {"send_timeout", c.SendTimeout},
		{"catchup_interval", c.CatchupInterval}, {"retry_interval", c.RetryInterval}, {"dead_letter_delay", c.DeadLetterDelay}} {
		if d.v.Duration <= 0 {
			return bad(d.name, "%v: must be positive", d.v.Duration)
		}
	}
	// Below a few seconds a slow but healthy download would be cancelled;
	// above an hour a stalled one holds a worker and its disk budget.
	if d := c.DownloadStallTimeout.Duration; d < 5*time.Second || d > time.Hour {
		return bad("download_stall_timeout", "%s is outside 5s..1h", d)
	}
	// Below a few seconds a database hiccup stops accounts; above ten
	// minutes a dead owner's accounts wait that long for a standby.
	if d := c.LeaseTTL.Duration; d < 3*time.Second || d > 10*time.Minute {
		return bad("lease_ttl", "%s is outside 3s..10m", d)
	}
	if c.DeadLetterAttempts < 1 || c.DeadLetterAttempts > 100 {
		return bad("dead_letter_attempts", "%d is outside 1..100", c.DeadLetterAttempts)
	}
	if c.DownloadBudget < 1<<20 {
		return bad("download_budget", "%d bytes is below 1MiB", int64(c.DownloadBudget))
	}
	if !slices.Contains([]string{RepacksSkip, RepacksDeliver, RepacksLink}, c.Repacks) {
		return bad("repacks", "%q is not skip, deliver or link", c.Repacks)
	}
	return nil
}

// The values of Config.Repacks.
const (
	RepacksSkip    = "skip"
	RepacksDeliver = "deliver"
	RepacksLink    = "link"
)

// Load reads a daemon's configuration: the file at path (may be ""), then
// the environment (getenv), then the flags already parsed into fs (only
// those set on the command line count). It returns the first problem
// found, naming the flag, variable or file line it came from.
func Load(path string, getenv func(string) string, fs *flag.FlagSet) (Config, error) {
	return LoadMode(path, getenv, fs, Daemon)
}

// LoadMode is Load for mode.
func LoadMode(path string, getenv func(string) string, fs *flag.FlagSet, mode Mode) (Config, error) {
	c := defaults(mode)
	// origin maps a setting to the flag or variable that set it, or to
	// the file.
	origin := map[string][2]string{}
	var lines []string
	if path != "" {
		md, err := toml.DecodeFile(path, &c)
		if err != nil {
			var perr toml.ParseError
			if errors.As(err, &perr) {
				at := fmt.Sprintf("%s:%d", path, perr.Position.Line)
				if perr.LastKey != "" {
					return c, &FieldError{Field: perr.LastKey, Source: at, Err: errors.New(oneLine(perr.Message))}
				}
				return c, fmt.Errorf("%s: %s", at, oneLine(perr.Message))
			}
			if errors.Is(err, os.ErrNotExist) {
				return c, fmt.Errorf("--config: %s does not exist", path)
			}
			return c, fmt.Errorf("%s: %s", path, oneLine(err.Error()))
		}
		if b, err := os.ReadFile(path); err == nil {
			lines = strings.Split(string(b), "\n")
		}
		if und := md.Undecoded(); len(und) > 0 {
			return c, &FieldError{Field: und[0].String(), Source: fileLine(path, lines, und[0][len(und[0])-1]), Err: errors.New("unknown field")}
		}
	}
	where := func(setting string) (string, string) {
		if o, ok := origin[setting]; ok {
			return o[0], o[1]
		}
		if path == "" {
			return setting, "default"
		}
		return setting, fileLine(path, lines, setting)
	}
	if err := applyEnv(&c, getenv, origin); err != nil {
		return c, err
	}
	if fs != nil {
		if err := applyFlags(&c, fs, origin); err != nil {
			return c, err
		}
	}
	routeAt := func(i int, key string) string { return routeLine(path, lines, i, key) }
	if path == "" {
		routeAt = func(int, string) string { return "default" }
	}
	return c, c.validate(mode, where, routeAt)
}

// fileLine returns "path:N" for the first line of the file that sets key,
// or path when none does.
func fileLine(path string, lines []string, key string) string {
	re, err := regexp.Compile(`^\s*"?` + regexp.QuoteMeta(key) + `"?\s*=`)
	if err == nil {
		for i, l := range lines {
			if re.MatchString(l) {
				return fmt.Sprintf("%s:%d", path, i+1)
			}
		}
	}
	return path
}

// routeLine returns "path:N" for the line that sets key in the i-th
// [[routes]] table, or that of the table's header when none does.
func routeLine(path string, lines []string, i int, key string) string {
	header := regexp.MustCompile(`^\s*\[\[\s*routes\s*\]\]`)
	table := regexp.MustCompile(`^\s*\[`)
	set, err := regexp.Compile(`^\s*"?` + regexp.QuoteMeta(key) + `"?\s*=`)
	n, at := -1, 0
	for j, l := range lines {
		switch {
		case header.MatchString(l):
			n++
			if n == i {
				at = j + 1
			}
		case table.MatchString(l) && n == i:
			n++ // another table ends the route's
		case n == i && err == nil && set.MatchString(l):
			return fmt.Sprintf("%s:%d", path, j+1)
		}
	}
	if at > 0 {
		return fmt.Sprintf("%s:%d", path, at)
	}
	return path
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Settings lists, for flags and the environment, every scalar setting: its
// flag and TOML name (the environment variable is STASHD_ + upper case).
var Settings = []struct{ Name, Usage string }{
	{"data_dir", "directory for TDLib state and the embedded database (default /var/lib/stashd; with serve --simulate ./var/simulate)"},
	{"database_url", "PostgreSQL URL of the catalogue (default: embedded cluster under data_dir)"},
	{"metrics_addr", "address of /metrics, /healthz, /readyz (default 127.0.0.1:9464; off disables)"},
	{"console_token", "bearer token of the web console (a secret: prefer the environment; empty: loopback clients only)"},
	{"console_remote", "serve the web console beyond loopback, with console_token (default false)"},
	{"log_level", "debug, info, warn or error (default info)"},
	{"log_format", "auto, text or json (default auto: text on a terminal)"},
	{"api_id", "Telegram api_id from https://my.telegram.org"},
	{"api_hash", "Telegram api_hash (a secret: prefer the environment)"},
	{"destinations", "comma-separated destination chats (@name, t.me link or id)"},
	{"workers", "ingest workers per account (default 4)"},
	{"queue_capacity", "ingest queue capacity per account (default 1024)"},
	{"rate", "Telegram requests per second per account (default 20)"},
	{"send_rate", "messages per minute each account sends at most (default 20)"},
	{"send_in_flight", "sends per account awaiting their outcome at once (default 3)"},
	{"backfill_rate", "packages per minute per account a newly added route backfills (default 30)"},
	{"drain_timeout", "graceful drain limit on SIGTERM (default 20s)"},
	{"send_timeout", "longest wait for one send's outcome before reconciling by token (default 5m)"},
	{"lease_ttl", "account lease lifetime when instances share the database; renewed every third of it (default 30s)"},
	{"rescan_interval", "time between rescans (default 6h)"},
	{"rescan_window", "how far back a rescan walks (default 72h)"},
	{"set_settle", "quiet time before a multipart set is complete (default 10s)"},
	{"set_max_wait", "how long parts wait for their set (default 1h)"},
	{"catchup_interval", "how often catch-up looks for sources with something new (default 2s)"},
	{"retry_interval", "how often dead letters due again are looked for (default 30s)"},
	{"dead_letter_delay", "first wait before a dead letter is retried, doubling each attempt (default 1m)"},
	{"dead_letter_attempts", "tries before a dead letter waits for an operator (default 8)"},
	{"download_stall_timeout", "cancel a download after this long without progress (default 2m)"},
	{"download_budget", "bytes of downloaded archives each account holds at once, e.g. 4GiB (default 4GiB)"},
	{"deliver_broken", "mirror a package that fails verification, marked broken (default false: dead-lettered)"},
	{"repacks", "a repack of a catalogued package (same entries, other bytes): skip, deliver or link (default skip)"},
}

// RegisterFlags defines one flag per setting (dashes for underscores) on
// fs, typed as the setting is (--workers int, --drain-timeout duration); a
// value that does not parse is an error of the flag, at parse time. With
// names, only those settings get a flag.
func RegisterFlags(fs *flag.FlagSet, names ...string) {
	for _, s := range Settings {
		if len(names) > 0 && !slices.Contains(names, s.Name) {
			continue
		}
		fs.Var(&settingValue{name: s.Name}, strings.ReplaceAll(s.Name, "_", "-"), s.Usage)
	}
}

// settingValue is a setting's flag: the text given, checked on Set.
type settingValue struct {
	name, raw string
}

func (v *settingValue) String() string { return v.raw }

func (v *settingValue) Set(s string) error {
	var scratch Config
	if err := set(&scratch, v.name, s); err != nil {
		return err
	}
	v.raw = s
	return nil
}

// Type names the value's type in --help.
func (v *settingValue) Type() string {
	switch v.name {
	case "workers", "queue_capacity", "api_id", "dead_letter_attempts":
		return "int"
	case "rate":
		return "float"
	case "drain_timeout", "rescan_interval", "rescan_window", "set_settle", "set_max_wait",
		"catchup_interval", "retry_interval", "dead_letter_delay", "send_timeout", "download_stall_timeout", "lease_ttl":
		return "duration"
	case "destinations":
		return "list"
	}
	return "string"
}

func applyEnv(c *Config, getenv func(string) string, origin map[string][2]string) error {
	for _, s := range Settings {
		name := "STASHD_" + strings.ToUpper(s.Name)
		if v := getenv(name); v != "" {
			if err := set(c, s.Name, v); err != nil {
				return &FieldError{Field: name, Source: "environment", Err: err}
			}
			origin[s.Name] = [2]string{name, "environment"}
		}
	}
	return nil
}

func applyFlags(c *Config, fs *flag.FlagSet, origin map[string][2]string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		name := strings.ReplaceAll(f.Name, "-", "_")
		for _, s := range Settings {
			if s.Name == name && err == nil {
				if e := set(c, name, f.Value.String()); e != nil {
					err = &FieldError{Field: "--" + f.Name, Err: e}
				}
				origin[name] = [2]string{"--" + f.Name, ""}
			}
		}
	})
	return err
}

func set(c *Config, name, v string) error {
	num := func(dst *int) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*dst = n
		return nil
	}
	dur := func(dst *Duration) error { return dst.UnmarshalText([]byte(v)) }
	switch name {
	case "data_dir":
		c.DataDir = v
	case "database_url":
		c.DatabaseURL = v
	case "metrics_addr":
		c.MetricsAddr = v
	case "console_token":
		c.ConsoleToken = v
	case "console_remote":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		c.ConsoleRemote = b
	case "deliver_broken":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		c.DeliverBroken = b
	case "repacks":
		c.Repacks = v
	case "log_level":
		c.LogLevel = v
	case "log_format":
		c.LogFormat = v
	case "api_id":
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		c.APIID = int32(n)
	case "api_hash":
		c.APIHash = v
	case "destinations":
		c.Destinations = nil
		for _, d := range strings.Split(v, ",") {
			if d = strings.TrimSpace(d); d != "" {
				c.Destinations = append(c.Destinations, d)
			}
		}
	case "workers":
		return num(&c.Workers)
	case "queue_capacity":
		return num(&c.QueueCapacity)
	case "rate":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		c.Rate = f
	case "send_rate":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		c.SendRate = f
	case "send_in_flight":
		return num(&c.SendInFlight)
	case "backfill_rate":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		c.BackfillRate = f
	case "drain_timeout":
		return dur(&c.DrainTimeout)
	case "send_timeout":
		return dur(&c.SendTimeout)
	case "lease_ttl":
		return dur(&c.LeaseTTL)
	case "rescan_interval":
		return dur(&c.RescanInterval)
	case "rescan_window":
		return dur(&c.RescanWindow)
	case "set_settle":
		return dur(&c.SetSettle)
	case "set_max_wait":
		return dur(&c.SetMaxWait)
	case "download_stall_timeout":
		return dur(&c.DownloadStallTimeout)
	case "catchup_interval":
		return dur(&c.CatchupInterval)
	case "retry_interval":
		return dur(&c.RetryInterval)
	case "dead_letter_delay":
		return dur(&c.DeadLetterDelay)
	case "dead_letter_attempts":
		return num(&c.DeadLetterAttempts)
	case "download_budget":
		return c.DownloadBudget.UnmarshalText([]byte(v))
	}
	return nil
}
