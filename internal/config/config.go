package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"stashd/internal/caption"
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
	// (MetricsAddr bound elsewhere), over HTTPS only. It requires
	// ConsoleToken, and ConsoleTLSCert/ConsoleTLSKey or ConsoleBehindProxy.
	// Default false.
	ConsoleRemote bool `toml:"console_remote"`
	// ConsoleTLSCert and ConsoleTLSKey are PEM files: set both and
	// MetricsAddr serves HTTPS (the console, /metrics, /healthz, /readyz).
	// Empty (default): plain HTTP.
	ConsoleTLSCert string `toml:"console_tls_cert"`
	ConsoleTLSKey  string `toml:"console_tls_key"`
	// ConsoleBehindProxy says that remote clients reach MetricsAddr through
	// a reverse proxy that terminates HTTPS; its X-Forwarded-For and
	// X-Forwarded-Proto are believed from ConsoleTrustedProxy only.
	// Default false.
	ConsoleBehindProxy bool `toml:"console_behind_proxy"`
	// ConsoleTrustedProxy is the proxy's address: comma-separated IP
	// addresses or CIDR prefixes. Empty (default): loopback (127.0.0.0/8,
	// ::1). Only with ConsoleBehindProxy.
	ConsoleTrustedProxy string `toml:"console_trusted_proxy"`
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
	// LockTTL is how long a package lock (a worker's hold on a file it
	// downloads, a deliverer's on a delivery) lasts without renewal:
	// renewed every third of it; the lock of an instance that died
	// without letting it go blocks its package that long. Default 30s;
	// 3s..10m.
	LockTTL Duration `toml:"lock_ttl"`
	// DeliveryDrainAlert is the delivery backlog's drain time (at the send
	// budgets) past which the alert StashdDeliveryBacklogDrainingSlowly
	// fires; exported as stashd_delivery_drain_alert_seconds. Default 1h;
	// 1m..30d.
	DeliveryDrainAlert Duration `toml:"delivery_drain_alert"`
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
	// it doubles with each attempt (sixteen times at most). Default 1m;
	// at most 24h (MaxDeadLetterDelay).
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
	// SendRate is each account's send budget: send requests per minute, spaced
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
	// Proxy is the proxy every account's TDLib client connects through,
	// unless the account names its own: socks5://[user[:pass]@]host:port,
	// http://[user[:pass]@]host:port or mtproto://secret@host:port. Empty:
	// a direct connection. The password and the secret are never logged;
	// prefer STASHD_PROXY to the file.
	Proxy string `toml:"proxy"`
	// DeliverBroken mirrors a package whose archive fails verification
	// (a damaged or cut-short archive, a set that does not chain), marked
	// broken in the catalogue and in the caption. Default false: such a
	// package is dead-lettered with the reason.
	DeliverBroken bool `toml:"deliver_broken"`
	// Caption is the template of the caption under every document sent:
	// {name}, {size} (12.3 MiB), {source} (@username or title), {date}
	// (the source message's, UTC, YYYY-MM-DD), {parts} ("part 2/5", empty
	// for a single file) and {link} (the source message's t.me link); a
	// parenthesised group whose placeholders are all empty is dropped.
	// The delivery token is always added as the last line. Empty means
	// "{name} ({parts})".
	Caption string `toml:"caption"`
	// Silent sends without notifying the destination's members
	// (disable_notification). Default true.
	Silent bool `toml:"silent"`
	// Repacks says what happens to a repack: a package whose entries (path,
	// size, CRC) match a catalogued package's but whose archive bytes
	// differ. Every mode links it to the first. "skip" catalogues it as a
	// package of its own and delivers it nowhere, "deliver" delivers it
	// too, "link" delivers it nowhere and records its post as a copy of
	// the package it repacks. Default "skip".
	Repacks string `toml:"repacks"`
	// Accounts are the Telegram accounts and the sources each watches. At
	// least one is required.
	Accounts []Account `toml:"accounts"`

	// warnings are what Load found unsafe but not wrong (see Warnings).
	warnings []string
}

// Account is one Telegram account.
type Account struct {
	// Name names the account: its state directory, logs, metrics. Letters,
	// digits, '-' and '_'.
	Name string `toml:"name"`
	// Sources are the chats this account watches.
	Sources []Source `toml:"sources"`
	// Proxy, when set, replaces the global proxy for this account (same
	// forms). Empty: the global proxy, if any.
	Proxy string `toml:"proxy"`
}

// ProxyOf returns the proxy account a connects through: its own, else the
// global one; ok is false for a direct connection. Both were validated.
func (c *Config) ProxyOf(a Account) (p tg.Proxy, ok bool) {
	s := a.Proxy
	if s == "" {
		s = c.Proxy
	}
	if s == "" {
		return tg.Proxy{}, false
	}
	p, err := tg.ParseProxy(s)
	return p, err == nil
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

// MarshalText writes the duration as UnmarshalText reads it ("1m30s").
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

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
		LockTTL:              Duration{30 * time.Second},
		DeliveryDrainAlert:   Duration{time.Hour},
		DownloadStallTimeout: Duration{2 * time.Minute}, DownloadBudget: 4 << 30, RescanInterval: Duration{6 * time.Hour},
		RescanWindow: Duration{72 * time.Hour}, SetSettle: Duration{10 * time.Second}, SetMaxWait: Duration{time.Hour}, Repacks: RepacksSkip,
		Caption: caption.Default, Silent: true,
		CatchupInterval: Duration{2 * time.Second}, RetryInterval: Duration{30 * time.Second},
		DeadLetterDelay: Duration{time.Minute}, DeadLetterAttempts: 8,
	}
	if mode == Simulate {
		c.DataDir = SimulateDataDir
	}
	return c
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

// The values of Config.Repacks.
const (
	RepacksSkip    = "skip"
	RepacksDeliver = "deliver"
	RepacksLink    = "link"
)
