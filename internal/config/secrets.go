package config

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"stashd/internal/redact"
)

// secretSettings are the settings that hold secrets: database_url only
// when it holds a password.
var secretSettings = []string{"api_hash", "console_token", "database_url"}

// isSecret reports whether value, set for the setting name, is a secret.
func isSecret(name, value string) bool {
	switch name {
	case "api_hash", "console_token":
		return value != ""
	case "database_url":
		return redact.URL(value) != value
	}
	return false
}

// Warnings are what Load found unsafe without being wrong: secrets given
// as flags, a configuration file holding a secret that others can read.
// The caller logs them once its logger is set up. None shows a secret.
func (c *Config) Warnings() []string { return c.warnings }

// FlagWarnings returns a warning for each secret set on fs's command line
// (--api-hash, --console-token, a --database-url holding a password):
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
	values := map[string]string{"api_hash": c.APIHash, "console_token": c.ConsoleToken, "database_url": c.DatabaseURL}
	var held, envs []string
	for _, name := range secretSettings {
		if defined(name) && isSecret(name, values[name]) {
			held = append(held, name)
			envs = append(envs, "STASHD_"+strings.ToUpper(name))
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
	return []string{fmt.Sprintf("%s holds %s and %s can read it (mode %04o): chmod 600 it, or move the secret to the environment (%s)",
		path, strings.Join(held, ", "), who, st.Mode().Perm(), strings.Join(envs, ", "))}
}
