package config

import (
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"stashd/internal/caption"
	"stashd/internal/redact"
	"stashd/tg"
)

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

var accountRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

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
	if err := c.validateFinite(bad); err != nil {
		return err
	}
	if mode == Login {
		return c.validateLogin(bad)
	}
	if c.DataDir == "" {
		return bad("data_dir", "must not be empty")
	}
	if c.DatabaseURL != "" {
		if _, err := pgconn.ParseConfig(c.DatabaseURL); err != nil {
			// The URL is shown with its password masked: the message
			// reaches stderr, and so the journal.
			return bad("database_url", "%q is not a PostgreSQL URL (postgres://user@host:5432/db or \"host=... dbname=...\")", redact.URL(c.DatabaseURL))
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
	if err := c.validateConsoleTLS(bad); err != nil {
		return err
	}
	if err := c.validateTuning(bad); err != nil {
		return err
	}
	if err := c.validateProxies(bad); err != nil {
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

// intBounds are the ranges of the whole-number settings.
var intBounds = map[string][2]int{
	"workers":              {1, 256},
	"queue_capacity":       {1, 1 << 20},
	"send_in_flight":       {1, 64},
	"dead_letter_attempts": {1, 100},
}

// checkInt is bad's error for the whole-number setting name when n is
// outside its range (intBounds), nil otherwise.
func checkInt(bad badFunc, name string, n int) error {
	if b := intBounds[name]; n < b[0] || n > b[1] {
		return bad(name, "%d is outside %d..%d", n, b[0], b[1])
	}
	return nil
}

// MaxDeadLetterDelay bounds dead_letter_delay: doubled at most sixteen
// times, as a dead letter's wait is, it stays far from overflowing.
const MaxDeadLetterDelay = 24 * time.Hour

// validateFinite rejects NaN and ±Inf in every float setting, whatever the
// source: the file's TOML has nan and inf literals, and a range check
// lets NaN through (every comparison with it is false), which turns a
// limiter's pacing off. Found by reflection so that no float setting is
// left out.
func (c *Config) validateFinite(bad badFunc) error {
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if k := f.Kind(); k != reflect.Float64 && k != reflect.Float32 {
			continue
		}
		if x := f.Float(); math.IsNaN(x) || math.IsInf(x, 0) {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("toml"), ",")
			return bad(name, "%v is not a finite number", x)
		}
	}
	return nil
}

// validateProxies checks the global and every account's proxy; the
// message never repeats a password or secret.
func (c *Config) validateProxies(bad badFunc) error {
	if c.Proxy != "" {
		if _, err := tg.ParseProxy(c.Proxy); err != nil {
			return bad("proxy", "%v", err)
		}
	}
	for i, a := range c.Accounts {
		if a.Proxy != "" {
			if _, err := tg.ParseProxy(a.Proxy); err != nil {
				return bad(fmt.Sprintf("accounts[%d].proxy", i), "%v", err)
			}
		}
	}
	return nil
}

func (c *Config) validateLogin(bad badFunc) error {
	if err := c.validateProxies(bad); err != nil {
		return err
	}
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

func (c *Config) validateTuning(bad badFunc) error {
	if _, err := caption.Parse(c.Caption); err != nil {
		return bad("caption", "%v", err)
	}
	if !slices.Contains([]string{RepacksSkip, RepacksDeliver, RepacksLink}, c.Repacks) {
		return bad("repacks", "%q is not skip, deliver or link", c.Repacks)
	}
	if err := checkInt(bad, "workers", c.Workers); err != nil {
		return err
	}
	if err := checkInt(bad, "queue_capacity", c.QueueCapacity); err != nil {
		return err
	}
	if c.SendRate < 1 || c.SendRate > 6000 {
		return bad("send_rate", "%v is outside 1..6000 send requests per minute", c.SendRate)
	}
	if err := checkInt(bad, "send_in_flight", c.SendInFlight); err != nil {
		return err
	}
	if c.BackfillRate < 1 || c.BackfillRate > 6000 {
		return bad("backfill_rate", "%v is outside 1..6000 packages per minute", c.BackfillRate)
	}
	if c.Rate <= 0 || c.Rate > 1000 {
		return bad("rate", "%v is outside (0, 1000] requests per second", c.Rate)
	}
	// Every interval is positive; those with a minimum pace loops that
	// below it turn busy.
	for _, d := range []struct {
		name string
		v    Duration
		min  time.Duration
	}{{"drain_timeout", c.DrainTimeout, 0}, {"rescan_interval", c.RescanInterval, time.Second}, {"rescan_window", c.RescanWindow, 0},
		{"set_settle", c.SetSettle, 0}, {"set_max_wait", c.SetMaxWait, time.Second}, {"send_timeout", c.SendTimeout, time.Second},
		{"catchup_interval", c.CatchupInterval, 100 * time.Millisecond}, {"retry_interval", c.RetryInterval, 100 * time.Millisecond},
		{"dead_letter_delay", c.DeadLetterDelay, 100 * time.Millisecond}} {
		switch {
		case d.v.Duration <= 0:
			return bad(d.name, "%v: must be positive", d.v.Duration)
		case d.v.Duration < d.min:
			return bad(d.name, "%s is below the minimum, %s", d.v.Duration, d.min)
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
	// Below 3s a renewal every second competes with the work; beyond
	// minutes a crashed instance's packages wait that long.
	if d := c.LockTTL.Duration; d < 3*time.Second || d > 10*time.Minute {
		return bad("lock_ttl", "%s is outside 3s..10m", d)
	}
	// Below a minute the alert fires on every burst; beyond a month it
	// never does.
	if d := c.DeliveryDrainAlert.Duration; d < time.Minute || d > 30*24*time.Hour {
		return bad("delivery_drain_alert", "%s is outside 1m..720h", d)
	}
	// A dead letter's wait doubles with each attempt, sixteen times at
	// most (DeadLetterDelay << 16): above a day that product nears
	// time.Duration's limit (292 years), and past 39h it overflows into a
	// negative wait, due again at once.
	if d := c.DeadLetterDelay.Duration; d > MaxDeadLetterDelay {
		return bad("dead_letter_delay", "%s is outside 100ms..24h (it doubles with each attempt)", d)
	}
	if err := checkInt(bad, "dead_letter_attempts", c.DeadLetterAttempts); err != nil {
		return err
	}
	if c.DownloadBudget < 1<<20 {
		return bad("download_budget", "%d bytes is below 1MiB", int64(c.DownloadBudget))
	}
	return nil
}

// validateConsoleTLS checks the console's HTTPS settings: a remote console
// is served over HTTPS, by this listener or by a trusted proxy.
func (c *Config) validateConsoleTLS(bad func(string, string, ...any) error) error {
	switch {
	case c.ConsoleTLSCert != "" && c.ConsoleTLSKey == "":
		return bad("console_tls_cert", "needs console_tls_key too")
	case c.ConsoleTLSKey != "" && c.ConsoleTLSCert == "":
		return bad("console_tls_key", "needs console_tls_cert too")
	case c.ConsoleTLSCert != "":
		if _, err := tls.LoadX509KeyPair(c.ConsoleTLSCert, c.ConsoleTLSKey); err != nil {
			return bad("console_tls_cert", "cannot load the certificate and key: %v", err)
		}
	}
	if c.ConsoleRemote && c.ConsoleTLSCert == "" && !c.ConsoleBehindProxy {
		return bad("console_remote", "serving the console beyond loopback needs HTTPS: console_tls_cert and console_tls_key, or console_behind_proxy = true behind a proxy that terminates it")
	}
	if c.ConsoleTrustedProxy != "" {
		if !c.ConsoleBehindProxy {
			return bad("console_trusted_proxy", "is used only with console_behind_proxy = true")
		}
		if _, err := c.TrustedProxies(); err != nil {
			return bad("console_trusted_proxy", "%v", err)
		}
	}
	return nil
}

// TrustedProxies parses ConsoleTrustedProxy; empty gives none (the console
// then trusts loopback).
func (c *Config) TrustedProxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(c.ConsoleTrustedProxy, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address or CIDR prefix", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
