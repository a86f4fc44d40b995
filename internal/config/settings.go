package config

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Settings lists, for flags and the environment, every scalar setting: its
// flag and TOML name (the environment variable is STASHD_ + upper case).
var Settings = []struct{ Name, Usage string }{
	{"data_dir", "directory for TDLib state and the embedded database (default /var/lib/stashd; with serve --simulate ./var/simulate)"},
	{"database_url", "PostgreSQL URL of the catalogue (default: embedded cluster under data_dir; a password in it is a secret: prefer the environment)"},
	{"metrics_addr", "address of /metrics, /healthz, /readyz (default 127.0.0.1:9464; off disables)"},
	{"console_token", "bearer token of the web console (a secret: prefer the environment; empty: loopback clients only)"},
	{"console_remote", "serve the web console beyond loopback, with console_token, over HTTPS (default false)"},
	{"console_tls_cert", "PEM certificate: metrics_addr serves HTTPS (with console_tls_key; default: plain HTTP)"},
	{"console_tls_key", "PEM private key of console_tls_cert"},
	{"console_behind_proxy", "remote clients come through a proxy that terminates HTTPS (default false)"},
	{"console_trusted_proxy", "the proxy's addresses, comma-separated IPs or CIDRs (default loopback)"},
	{"deliver_broken", "mirror a package that fails verification, marked broken (default false: dead-lettered)"},
	{"caption", "caption template: {name} {size} {source} {date} {parts} {link}; the delivery token is added as the last line (default \"{name} ({parts})\")"},
	{"silent", "send without notifying the destination's members (default true)"},
	{"repacks", "a repack of a catalogued package (same entries, other bytes): skip, deliver or link (default skip)"},
	{"proxy", "proxy of every account without its own: socks5://user:pass@host:port, http://host:port or mtproto://secret@host:port (default: none)"},
	{"log_level", "debug, info, warn or error (default info)"},
	{"log_format", "auto, text or json (default auto: text on a terminal)"},
	{"api_id", "Telegram api_id from https://my.telegram.org"},
	{"api_hash", "Telegram api_hash (a secret: prefer the environment)"},
	{"destinations", "comma-separated destination chats (@name, t.me link or id)"},
	{"workers", "ingest workers per account (default 4)"},
	{"queue_capacity", "ingest queue capacity per account (default 1024)"},
	{"rate", "Telegram requests per second per account (default 20)"},
	{"send_rate", "send requests per minute each account makes at most, an album of up to ten documents being one (default 20)"},
	{"send_in_flight", "sends per account awaiting their outcome at once (default 3)"},
	{"backfill_rate", "packages per minute per account a newly added route backfills (default 30)"},
	{"drain_timeout", "graceful drain limit on SIGTERM (default 20s)"},
	{"send_timeout", "longest wait for one send's outcome before reconciling by token (default 5m; at least 1s)"},
	{"lease_ttl", "account lease lifetime when instances share the database; renewed every third of it (default 30s)"},
	{"lock_ttl", "package lock lifetime: renewed every third of it; a crashed instance's locks block their packages that long (default 30s)"},
	{"delivery_drain_alert", "delivery backlog drain time (at the send budgets) past which the backlog alert fires (default 1h)"},
	{"rescan_interval", "time between rescans (default 6h; at least 1s)"},
	{"rescan_window", "how far back a rescan walks (default 72h)"},
	{"set_settle", "quiet time before a multipart set is complete (default 10s)"},
	{"set_max_wait", "how long parts wait for their set (default 1h; at least 1s)"},
	{"catchup_interval", "how often catch-up looks for sources with something new (default 2s; at least 100ms)"},
	{"retry_interval", "how often dead letters due again are looked for (default 30s; at least 100ms)"},
	{"dead_letter_delay", "first wait before a dead letter is retried, doubling each attempt (default 1m; 100ms..24h)"},
	{"dead_letter_attempts", "tries before a dead letter waits for an operator (default 8)"},
	{"download_stall_timeout", "cancel a download after this long without progress (default 2m)"},
	{"download_budget", "bytes of downloaded archives each account holds at once, e.g. 4GiB (default 4GiB)"},
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

// Type names the value's type in --help, from the setting's field in
// Config: "" for a boolean (a bare switch), int, float, duration, list,
// size or string.
func (v *settingValue) Type() string {
	switch settingKind(v.name) {
	case reflect.Bool:
		return ""
	case reflect.Int, reflect.Int32:
		return "int"
	case reflect.Float64:
		return "float"
	case reflect.Slice:
		return "list"
	case reflect.Struct:
		return "duration"
	case reflect.Int64:
		return "size"
	}
	return "string"
}

// IsBoolFlag makes a boolean setting a switch: --silent is --silent=true,
// and --silent=false turns it off.
func (v *settingValue) IsBoolFlag() bool { return settingKind(v.name) == reflect.Bool }

// settingKind is the kind of the Config field the setting name fills
// (Duration is a struct, ByteSize an int64).
func settingKind(name string) reflect.Kind {
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); tag == name {
			return t.Field(i).Type.Kind()
		}
	}
	return reflect.Invalid
}

// Credentials are the settings systemd may hand over as credentials
// (LoadCredential=NAME:/path in the unit): each is read from the file
// $CREDENTIALS_DIRECTORY/NAME, so a secret never sits in the environment,
// a command line or a world-readable file.
var Credentials = []string{"api_hash", "console_token", "database_url", "proxy"}

// applyCredentials reads the settings systemd passed as credentials; a
// STASHD_* variable or a flag still wins over them.
func applyCredentials(c *Config, getenv func(string) string, origin map[string][2]string) error {
	dir := getenv("CREDENTIALS_DIRECTORY")
	if dir == "" {
		return nil
	}
	for _, name := range Credentials {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return &FieldError{Field: name, Source: "credential", Err: errors.New(oneLine(err.Error()))}
		}
		if err := set(c, name, strings.TrimSpace(string(b))); err != nil {
			return &FieldError{Field: name, Source: "credential " + name, Err: err}
		}
		origin[name] = [2]string{name, "credential"}
	}
	return nil
}

func applyEnv(c *Config, getenv func(string) string, origin map[string][2]string) error {
	if err := applyCredentials(c, getenv, origin); err != nil {
		return err
	}
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
		if errors.Is(err, strconv.ErrRange) {
			b := intBounds[name]
			return fmt.Errorf("%s is out of range: outside %d..%d", v, b[0], b[1])
		}
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*dst = n
		return nil
	}
	float := func(dst *float64) error {
		f, err := strconv.ParseFloat(v, 64)
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("%s is out of range for a number", v)
		}
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%q is not a finite number", v)
		}
		*dst = f
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
	case "console_tls_cert":
		c.ConsoleTLSCert = v
	case "console_tls_key":
		c.ConsoleTLSKey = v
	case "console_behind_proxy":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		c.ConsoleBehindProxy = b
	case "console_trusted_proxy":
		c.ConsoleTrustedProxy = v
	case "proxy":
		c.Proxy = v
	case "deliver_broken":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		c.DeliverBroken = b
	case "caption":
		c.Caption = v
	case "silent":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		c.Silent = b
	case "repacks":
		c.Repacks = v
	case "log_level":
		c.LogLevel = v
	case "log_format":
		c.LogFormat = v
	case "api_id":
		n, err := strconv.ParseInt(v, 10, 32)
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("%s is out of range: outside 1..%d", v, math.MaxInt32)
		}
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
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
		return float(&c.Rate)
	case "send_rate":
		return float(&c.SendRate)
	case "send_in_flight":
		return num(&c.SendInFlight)
	case "backfill_rate":
		return float(&c.BackfillRate)
	case "drain_timeout":
		return dur(&c.DrainTimeout)
	case "send_timeout":
		return dur(&c.SendTimeout)
	case "lease_ttl":
		return dur(&c.LeaseTTL)
	case "lock_ttl":
		return dur(&c.LockTTL)
	case "delivery_drain_alert":
		return dur(&c.DeliveryDrainAlert)
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
