package config

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"stashd/internal/redact"
)

// FuzzLoad loads arbitrary TOML with one STASHD_* variable set to an
// arbitrary value, in every mode. Nothing may panic, an error never shows
// a database URL holding a password, and a configuration that is accepted
// must survive a round trip: written back as TOML, it loads again, is
// accepted, and reads the same. The seed corpus is the shipped examples
// and testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{"../../deploy/stashd.example.toml", "../../deploy/demo-routes.toml", "../../deploy/demo-routes-topics.toml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, uint8(0), "")
		}
	}
	f.Add([]byte(good), uint8(0), "")
	f.Fuzz(func(t *testing.T, body []byte, setting uint8, value string) {
		name := "STASHD_" + strings.ToUpper(Settings[int(setting)%len(Settings)].Name)
		env := func(k string) string {
			if k == name {
				return value
			}
			if k == "STASHD_API_HASH" && value == "" {
				return hash // lets a file without credentials get past them
			}
			return ""
		}
		// load is LoadMode past reading the file: no file system, so
		// that the fuzzer spends its time in decoding and validation.
		const path = "fuzz.toml"
		for _, mode := range []Mode{Daemon, Simulate, Login} {
			c, err := load(path, body, env, nil, mode)
			if err != nil {
				// The redacted form may hold the value itself (an
				// empty password is redacted by appending the mask):
				// the value must not show outside it.
				if name == "STASHD_DATABASE_URL" && redact.URL(value) != value &&
					strings.Contains(strings.ReplaceAll(err.Error(), redact.URL(value), ""), value) {
					t.Fatalf("mode %d: the error shows the database URL with its password: %v", mode, err)
				}
				continue
			}
			if err := c.Validate(path); mode == Daemon && err != nil {
				t.Fatalf("mode %d: accepted, then refused by Validate: %v", mode, err)
			}
			if !utf8.ValidString(value) {
				// TOML strings are UTF-8: a value the environment gave
				// in other bytes (a data_dir is any path) cannot be
				// written back.
				continue
			}
			var buf bytes.Buffer
			if err := toml.NewEncoder(&buf).Encode(c); err != nil {
				t.Fatalf("mode %d: accepted configuration does not encode: %v", mode, err)
			}
			c2, err := load(path, buf.Bytes(), func(string) string { return "" }, nil, mode)
			if err != nil {
				t.Fatalf("mode %d: accepted configuration refused once written back: %v\n%s", mode, err, buf.Bytes())
			}
			c.warnings, c2.warnings = nil, nil
			if !reflect.DeepEqual(c, c2) {
				t.Fatalf("mode %d: written back and read again, the configuration changed:\n%+v\n%+v", mode, c, c2)
			}
		}
	})
}
