package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
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
			var perr toml.ParseError
			if errors.As(err, &perr) {
				at := fmt.Sprintf("%s:%d", path, perr.Position.Line)
				if perr.LastKey != "" {
					return c, &FieldError{Field: perr.LastKey, Source: at, Err: errors.New(oneLine(perr.Message))}
				}
				return c, fmt.Errorf("%s: %s", at, oneLine(perr.Message))
			}
			return c, fmt.Errorf("%s: %s", path, oneLine(err.Error()))
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
