package config

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"stashd/internal/redact"
	"stashd/tg"
)

// secretSettings are the settings that hold secrets: database_url and
// proxy only when they hold a password (or, for an MTProto proxy, its
// secret).
var secretSettings = []string{"api_hash", "console_token", "database_url", "proxy"}

// isSecret reports whether value, set for the setting name, is a secret.
func isSecret(name, value string) bool {
	switch name {
	case "api_hash", "console_token":
		return value != ""
	case "database_url":
		return redact.URL(value) != value
	case "proxy":
		return proxySecret(value)
	}
	return false
}

// proxySecret reports whether a proxy URL holds a password or an MTProto
// secret; one that does not parse counts as holding one when it has user
// information (an '@').
func proxySecret(value string) bool {
	if value == "" {
		return false
	}
	p, err := tg.ParseProxy(value)
	if err != nil {
		return strings.Contains(value, "@")
	}
	return p.Password != "" || p.Secret != ""
}

// Warnings are what Load found unsafe without being wrong: secrets given
// as flags, a configuration file holding a secret that others can read.
// The caller logs them once its logger is set up. None shows a secret.
func (c *Config) Warnings() []string { return c.warnings }

// FlagWarnings returns a warning for each secret set on fs's command line
// (--api-hash, --console-token, a --database-url or --proxy holding a
// password):
// every user of the machine reads command lines (ps, /proc/PID/cmdline).
// The environment is read by the process's user and root only.
func FlagWarnings(fs *flag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *flag.Flag) {
		name := strings.ReplaceAll(f.Name, "-", "_")
		if !isSecret(name, f.Value.String()) {
			return
		}
		w := fmt.Sprintf("--%s holds a secret on the command line, where every user of the machine can read it (ps): set STASHD_%s in the environment instead (under systemd, an EnvironmentFile= only root can read)",
			f.Name, strings.ToUpper(name))
		if name == "database_url" {
			w += ", or keep the password in ~/.pgpass (PGPASSFILE)"
		}
		out = append(out, w)
	})
	return out
}

// fileWarnings returns a warning when the configuration file at path,
// decoded into c, holds a secret (defined names the settings the file
// sets) and group or others may read it.
func fileWarnings(path string, c Config, defined func(setting string) bool) []string {
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm()&0o044 == 0 {
		return nil
	}
	values := map[string]string{"api_hash": c.APIHash, "console_token": c.ConsoleToken, "database_url": c.DatabaseURL, "proxy": c.Proxy}
	var held, envs []string
	for _, name := range secretSettings {
		if defined(name) && isSecret(name, values[name]) {
			held = append(held, name)
			envs = append(envs, "STASHD_"+strings.ToUpper(name))
		}
	}
	// An account's proxy has no variable of its own: the file must be
	// made private.
	for i, a := range c.Accounts {
		if proxySecret(a.Proxy) {
			held = append(held, fmt.Sprintf("accounts[%d].proxy", i))
		}
	}
	if len(held) == 0 {
		return nil
	}
	who := "group and others"
	switch st.Mode().Perm() & 0o044 {
	case 0o040:
		who = "its group"
	case 0o004:
		who = "others"
	}
	fix := "chmod 600 it"
	if len(envs) > 0 {
		fix += fmt.Sprintf(", or move the secret to the environment (%s)", strings.Join(envs, ", "))
	}
	return []string{fmt.Sprintf("%s holds %s and %s can read it (mode %04o): %s",
		path, strings.Join(held, ", "), who, st.Mode().Perm(), fix)}
}
