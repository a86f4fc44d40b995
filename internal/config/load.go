package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
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
	var body []byte
	if path != "" {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return defaults(mode), fmt.Errorf("--config: %s does not exist", path)
		}
		if err != nil {
			return defaults(mode), fmt.Errorf("%s: %s", path, oneLine(err.Error()))
		}
		body = b
	}
	return load(path, body, getenv, fs, mode)
}

// load is LoadMode with the file at path already read into body.
func load(path string, body []byte, getenv func(string) string, fs *flag.FlagSet, mode Mode) (Config, error) {
	c := defaults(mode)
	// origin maps a setting to the flag or variable that set it, or to
	// the file.
	origin := map[string][2]string{}
	var lines []string
	if path != "" {
		md, err := toml.Decode(string(body), &c)
		if err != nil {
			return c, decodeError(path, body, err)
		}
		lines = strings.Split(string(body), "\n")
		if und := md.Undecoded(); len(und) > 0 {
			return c, &FieldError{Field: und[0].String(), Source: fileLine(path, lines, und[0][len(und[0])-1]), Err: errors.New("unknown field")}
		}
		c.warnings = fileWarnings(path, c, func(setting string) bool { return md.IsDefined(setting) })
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
		c.warnings = append(c.warnings, FlagWarnings(fs)...)
	}
	routeAt := func(i int, key string) string { return routeLine(path, lines, i, key) }
	if path == "" {
		routeAt = func(int, string) string { return "default" }
	}
	return c, c.validate(mode, where, routeAt)
}

// DecodeFile decodes the TOML file at path into v, as Load reads it; an
// error is one line naming the file's line and key, and never shows the
// value of a secret setting. A missing file is an error wrapping
// os.ErrNotExist.
func DecodeFile(path string, v any) error {
	body, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return err
		}
		return fmt.Errorf("%s: %s", path, oneLine(err.Error()))
	}
	if _, err := toml.Decode(string(body), v); err != nil {
		return decodeError(path, body, err)
	}
	return nil
}

// keyRE matches the key a line of TOML sets.
var keyRE = regexp.MustCompile(`^\s*["']?([A-Za-z0-9_.-]+)["']?\s*=`)

// decodeError describes in one line err, an error decoding the file at
// path (holding body). The parser quotes the text it stumbled on, which on
// a line setting a secret (console_token = 98765... written unquoted) is
// the secret: that line's message is replaced with one that shows none of
// it.
func decodeError(path string, body []byte, err error) error {
	var perr toml.ParseError
	if !errors.As(err, &perr) {
		return fmt.Errorf("%s: %s", path, oneLine(err.Error()))
	}
	at := fmt.Sprintf("%s:%d", path, perr.Position.Line)
	key := perr.LastKey
	lines := strings.Split(string(body), "\n")
	if n := perr.Position.Line - 1; n >= 0 && n < len(lines) {
		if m := keyRE.FindStringSubmatch(lines[n]); m != nil {
			key = m[1]
			if perr.LastKey != "" && strings.HasSuffix(perr.LastKey, "."+key) {
				key = perr.LastKey
			}
		}
	}
	msg := oneLine(perr.Message)
	if secretKey(key) || secretKey(perr.LastKey) {
		msg = "cannot be read (the value is not shown: it is a secret); write it as a quoted string, e.g. " + key[strings.LastIndex(key, ".")+1:] + " = \"...\""
	}
	if key != "" {
		return &FieldError{Field: key, Source: at, Err: errors.New(msg)}
	}
	return fmt.Errorf("%s: %s", at, msg)
}

// secretKey reports whether the TOML key (dotted: accounts.proxy, an
// account's proxy) names a setting that may hold a secret.
func secretKey(key string) bool {
	if key == "" {
		return false
	}
	name := key[strings.LastIndex(key, ".")+1:]
	return slices.Contains(secretSettings, name)
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
