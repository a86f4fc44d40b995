package tdlib

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	err := Config{}.validate()
	for _, want := range []string{"account", "state directory", "api_id", "api_hash"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("empty config: error %v does not mention %s", err, want)
		}
	}
	ok := Config{Account: "main", StateDir: t.TempDir(), APIID: 1, APIHash: "h"}
	if err := ok.validate(); err != nil {
		t.Errorf("complete config: %v", err)
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg := Config{Account: "main", TDLibLogVerbosity: -3}.withDefaults()
	if cfg.SystemLanguageCode != "en" || cfg.DeviceModel != "stashd" || cfg.ApplicationVersion != "dev" || cfg.SystemVersion == "" {
		t.Errorf("defaults not filled: %+v", cfg)
	}
	if cfg.TDLibLogVerbosity != 1 {
		t.Errorf("log verbosity %d, want 1", cfg.TDLibLogVerbosity)
	}
	if cfg.Authorizer == nil || cfg.Logger == nil {
		t.Fatal("no default Authorizer or Logger")
	}
	_, err := cfg.Authorizer(context.Background(), AuthState{Name: StateWaitPhoneNumber})
	var nli *NotLoggedInError
	if !errors.As(err, &nli) || nli.Account != "main" {
		t.Errorf("default Authorizer: %v", err)
	}
}

func TestNotLoggedInError(t *testing.T) {
	t.Parallel()
	_, err := NotLoggedIn("alice")(context.Background(), AuthState{Account: "alice", Name: StateWaitCode})
	want := "account alice is not logged in (authorizationStateWaitCode): run stashd login --account alice"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestConfigMakeDirs(t *testing.T) {
	t.Parallel()
	cfg := Config{StateDir: filepath.Join(t.TempDir(), "accounts", "main")}
	if err := cfg.makeDirs(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{cfg.StateDir, cfg.DatabaseDir(), cfg.FilesDir()} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s: mode %o, want 700", dir, perm)
		}
	}
}
