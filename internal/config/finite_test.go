package config

import (
	"flag"
	"reflect"
	"strings"
	"testing"
)

// floatSettings returns the TOML names of every float setting of Config,
// so that a float setting added later is checked too.
func floatSettings(t *testing.T) []string {
	t.Helper()
	var names []string
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		if k := typ.Field(i).Type.Kind(); k == reflect.Float64 || k == reflect.Float32 {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("toml"), ",")
			names = append(names, name)
		}
	}
	if len(names) < 3 {
		t.Fatalf("float settings %v: expected at least rate, send_rate, backfill_rate", names)
	}
	return names
}

// checkNonFinite fails unless err is one line naming shown and saying the
// value is not finite.
func checkNonFinite(t *testing.T, err error, shown string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want an error naming %s", shown)
	}
	msg := err.Error()
	if !strings.Contains(msg, shown) || !strings.Contains(msg, "not a finite number") || strings.Contains(msg, "\n") {
		t.Fatalf("error %q: want one line naming %s and saying it is not a finite number", msg, shown)
	}
}

func TestNonFiniteFromFileRejected(t *testing.T) {
	t.Parallel()
	for _, name := range floatSettings(t) {
		for _, v := range []string{"nan", "+nan", "-nan", "inf", "+inf", "-inf"} {
			t.Run(name+"="+v, func(t *testing.T) {
				t.Parallel()
				_, err := Load(write(t, name+" = "+v+"\n"+good), noEnv, nil)
				checkNonFinite(t, err, name)
				if !strings.Contains(err.Error(), "stashd.toml:1: ") {
					t.Errorf("error %q does not give the file line", err)
				}
			})
		}
	}
}

func TestNonFiniteFromEnvironmentRejected(t *testing.T) {
	t.Parallel()
	for _, name := range floatSettings(t) {
		for _, v := range []string{"NaN", "nan", "Inf", "+Inf", "-Inf", "infinity", "1e400"} {
			t.Run(name+"="+v, func(t *testing.T) {
				t.Parallel()
				variable := "STASHD_" + strings.ToUpper(name)
				env := func(k string) string {
					if k == variable {
						return v
					}
					return ""
				}
				_, err := Load(write(t, good), env, nil)
				if err == nil {
					t.Fatalf("accepted; want an error naming %s", variable)
				}
				if v == "1e400" { // out of float64's range: not a number at all
					if !strings.Contains(err.Error(), variable) {
						t.Fatalf("error %q does not name %s", err, variable)
					}
					return
				}
				checkNonFinite(t, err, variable)
			})
		}
	}
}

func TestNonFiniteFromFlagRejected(t *testing.T) {
	t.Parallel()
	for _, name := range floatSettings(t) {
		for _, v := range []string{"NaN", "Inf", "-Inf"} {
			t.Run(name+"="+v, func(t *testing.T) {
				t.Parallel()
				fs := flag.NewFlagSet("serve", flag.ContinueOnError)
				fs.SetOutput(new(strings.Builder))
				RegisterFlags(fs)
				flagName := "--" + strings.ReplaceAll(name, "_", "-")
				// The flag package reports a value its Set refuses; Load
				// reports one that passed Set. Either way it is refused
				// in one line naming the flag.
				err := fs.Parse([]string{flagName + "=" + v})
				if err == nil {
					_, err = Load(write(t, good), noEnv, fs)
				}
				checkNonFinite(t, err, strings.TrimPrefix(flagName, "-"))
			})
		}
	}
}
