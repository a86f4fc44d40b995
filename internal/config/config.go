package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"stashd/tg"
)

// Config is the daemon's configuration. The zero value of a field means its
// default, filled in by Load.
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
	// Required.
	Destinations []string `toml:"destinations"`
	// Workers is the number of ingest workers per account. Default 4.
	Workers int `toml:"workers"`
	// QueueCapacity bounds each account's ingest queue. Default 1024.
	QueueCapacity int `toml:"queue_capacity"`
	// Rate is each account's Telegram request rate per second. Default 20.
	Rate float64 `toml:"rate"`
	// DrainTimeout bounds the graceful drain on SIGTERM. Default 20s.
	DrainTimeout Duration `toml:"drain_timeout"`
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
// ({ chat = "@forum", topics = [3, 17] }).
type Source struct {
	Chat   string  `toml:"chat"`
	Topics []int64 `toml:"topics"`
}

// UnmarshalTOML accepts a string or a table.
func (s *Source) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		s.Chat = v
		return nil
	case map[string]any:
		for k, val := range v {
			switch k {
			case "chat":
				str, ok := val.(string)
				if !ok {
					return errors.New("chat must be a string")
				}
				s.Chat = str
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
				return fmt.Errorf("unknown field %q (chat, topics)", k)
			}
		}
		return nil
	}
	return fmt.Errorf("%v is neither a chat reference nor a table", v)
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

// FieldError is a configuration error about one field.
type FieldError struct {
	Field  string
	Source string // file path, "environment" or "flags"
	Err    error
}

func (e *FieldError) Error() string {
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

// defaults fills zero fields.
func (c *Config) defaults() {
	or := func(s *string, def string) {
		if *s == "" {
			*s = def
		}
	}
	or(&c.DataDir, "/var/lib/stashd")
	or(&c.MetricsAddr, "127.0.0.1:9464")
	or(&c.LogLevel, "info")
	or(&c.LogFormat, "auto")
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.QueueCapacity == 0 {
		c.QueueCapacity = 1024
	}
	if c.Rate == 0 {
		c.Rate = 20
	}
	durOr := func(d *Duration, def time.Duration) {
		if d.Duration == 0 {
			d.Duration = def
		}
	}
	durOr(&c.DrainTimeout, 20*time.Second)
	durOr(&c.RescanInterval, 6*time.Hour)
	durOr(&c.RescanWindow, 72*time.Hour)
	durOr(&c.SetSettle, 10*time.Second)
	durOr(&c.SetMaxWait, time.Hour)
}

// Validate checks every field and returns the first problem as a
// *FieldError. origin labels where the configuration came from.
func (c *Config) Validate(origin string) error { return c.validate(origin, true) }

// validate checks the fields; telegram false skips what only a real
// Telegram connection needs (credentials, accounts, destinations).
func (c *Config) validate(origin string, telegram bool) error {
	bad := func(field string, format string, args ...any) error {
		return &FieldError{Field: field, Source: origin, Err: fmt.Errorf(format, args...)}
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
	if err := c.validateTuning(bad); err != nil || !telegram {
		return err
	}
	if c.APIID <= 0 {
		return bad("api_id", "required: the api_id of your application from https://my.telegram.org (or STASHD_API_ID)")
	}
	if c.APIHash == "" {
		return bad("api_hash", "required: the api_hash from https://my.telegram.org (or STASHD_API_HASH)")
	}
	if !regexp.MustCompile(`^[0-9a-fA-F]{32}$`).MatchString(c.APIHash) {
		return bad("api_hash", "must be the 32 hexadecimal digits my.telegram.org shows")
	}
	if len(c.Destinations) == 0 {
		return bad("destinations", "at least one destination chat is required")
	}
	for i, d := range c.Destinations {
		if _, err := ParseChatRef(d); err != nil {
			return bad(fmt.Sprintf("destinations[%d]", i), "%v", err)
		}
	}
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
		}
	}
	return nil
}

func (c *Config) validateTuning(bad func(field, format string, args ...any) error) error {
	if c.Workers < 1 || c.Workers > 256 {
		return bad("workers", "%d is outside 1..256", c.Workers)
	}
	if c.QueueCapacity < 1 || c.QueueCapacity > 1<<20 {
		return bad("queue_capacity", "%d is outside 1..1048576", c.QueueCapacity)
	}
	if c.Rate <= 0 || c.Rate > 1000 {
		return bad("rate", "%v is outside (0, 1000] requests per second", c.Rate)
	}
	return nil
}

// Load reads the configuration: the file at path (may be ""), then the
// environment (getenv), then the flags already parsed into fs (only those
// set on the command line count). It returns the first problem found, naming
// its field.
func Load(path string, getenv func(string) string, fs *flag.FlagSet) (Config, error) {
	return LoadMode(path, getenv, fs, true)
}

// LoadMode is Load; telegram false accepts a configuration without
// credentials, accounts or destinations (the simulator supplies them).
func LoadMode(path string, getenv func(string) string, fs *flag.FlagSet, telegram bool) (Config, error) {
	var c Config
	origin := "configuration"
	if path != "" {
		origin = path
		md, err := toml.DecodeFile(path, &c)
		if err != nil {
			var perr toml.ParseError
			if errors.As(err, &perr) {
				if perr.LastKey != "" {
					return c, &FieldError{Field: perr.LastKey, Source: fmt.Sprintf("%s line %d", path, perr.Position.Line), Err: errors.New(perr.Message)}
				}
				return c, fmt.Errorf("%s: line %d: %s", path, perr.Position.Line, perr.Message)
			}
			if errors.Is(err, os.ErrNotExist) {
				return c, fmt.Errorf("config file %s does not exist", path)
			}
			return c, fmt.Errorf("%s: %w", path, err)
		}
		if und := md.Undecoded(); len(und) > 0 {
			return c, &FieldError{Field: und[0].String(), Source: path, Err: errors.New("unknown field")}
		}
	}
	if err := applyEnv(&c, getenv); err != nil {
		return c, err
	}
	if fs != nil {
		if err := applyFlags(&c, fs); err != nil {
			return c, err
		}
	}
	c.defaults()
	return c, c.validate(origin, telegram)
}

// Settings lists, for flags and the environment, every scalar setting: its
// flag and TOML name (the environment variable is STASHD_ + upper case).
var Settings = []struct{ Name, Usage string }{
	{"data_dir", "directory for TDLib state and the embedded database (default /var/lib/stashd)"},
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
	{"drain_timeout", "graceful drain limit on SIGTERM (default 20s)"},
	{"rescan_interval", "time between rescans (default 6h)"},
	{"rescan_window", "how far back a rescan walks (default 72h)"},
	{"set_settle", "quiet time before a multipart set is complete (default 10s)"},
	{"set_max_wait", "how long parts wait for their set (default 1h)"},
}

// RegisterFlags defines one string flag per setting (dashes for
// underscores) on fs.
func RegisterFlags(fs *flag.FlagSet) {
	for _, s := range Settings {
		fs.String(strings.ReplaceAll(s.Name, "_", "-"), "", s.Usage)
	}
}

func applyEnv(c *Config, getenv func(string) string) error {
	for _, s := range Settings {
		if v := getenv("STASHD_" + strings.ToUpper(s.Name)); v != "" {
			if err := set(c, s.Name, v); err != nil {
				return &FieldError{Field: "STASHD_" + strings.ToUpper(s.Name), Source: "environment", Err: err}
			}
		}
	}
	return nil
}

func applyFlags(c *Config, fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		name := strings.ReplaceAll(f.Name, "-", "_")
		for _, s := range Settings {
			if s.Name == name && err == nil {
				if e := set(c, name, f.Value.String()); e != nil {
					err = &FieldError{Field: "--" + f.Name, Source: "flags", Err: e}
				}
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
	case "drain_timeout":
		return dur(&c.DrainTimeout)
	case "rescan_interval":
		return dur(&c.RescanInterval)
	case "rescan_window":
		return dur(&c.RescanWindow)
	case "set_settle":
		return dur(&c.SetSettle)
	case "set_max_wait":
		return dur(&c.SetMaxWait)
	}
	return nil
}
