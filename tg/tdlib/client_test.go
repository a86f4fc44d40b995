//go:build libtdjson

package tdlib

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"stashd/tg"
)

// These tests run the real TDLib 1.8.40 (make test-tdlib). The machine has
// no network: TDLib starts, reaches the login, and cannot get further, which
// is all they need.

// offlineConfig is an account with a fresh state directory and an API id
// that Telegram never sees.
func offlineConfig(t *testing.T) Config {
	t.Helper()
	return Config{
		Account:  "offline",
		StateDir: t.TempDir(),
		APIID:    94575,
		APIHash:  "a3406de8d171bb422bb6ddf3bbd800e2",
		Logger:   slog.New(slog.DiscardHandler),
	}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestVersion(t *testing.T) {
	t.Parallel()
	v, err := Version()
	if err != nil {
		t.Fatal(err)
	}
	if v != "1.8.40" {
		t.Errorf("TDLib version %q, want 1.8.40 (go-tdlib v0.7.6 is generated from it)", v)
	}
}

func TestNewNotLoggedIn(t *testing.T) {
	t.Parallel()
	cfg := offlineConfig(t)
	c, err := New(testContext(t), cfg)
	if c != nil {
		t.Fatal("New returned a client for an account that is not logged in")
	}
	var nli *NotLoggedInError
	if !errors.As(err, &nli) {
		t.Fatalf("New: %v, want a *NotLoggedInError", err)
	}
	want := "account offline is not logged in (authorizationStateWaitPhoneNumber): run stashd login --account offline"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	// TDLib created its database under the state directory.
	entries, err := os.ReadDir(cfg.DatabaseDir())
	if err != nil || len(entries) == 0 {
		t.Errorf("database directory: %d entries, %v", len(entries), err)
	}
	// TestMain's goleak check covers the goroutines of the closed client.
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	t.Parallel()
	cfg := offlineConfig(t)
	cfg.APIHash = ""
	if _, err := New(testContext(t), cfg); err == nil {
		t.Error("New accepted a config without api_hash")
	}
}

// TestCloseDuringLogin holds a client at authorizationStateWaitPhoneNumber
// with an Authorizer that waits for a person, makes a real request and
// reads real updates meanwhile, then closes it.
func TestCloseDuringLogin(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	cfg := offlineConfig(t)
	asked := make(chan AuthState, 1)
	cfg.Authorizer = func(ctx context.Context, st AuthState) (string, error) {
		asked <- st
		<-ctx.Done()
		return "", ctx.Err()
	}
	cfg = cfg.withDefaults()
	if err := configureLog(cfg); err != nil {
		t.Fatal(err)
	}
	c := newClient(cfg)
	started := make(chan error, 1)
	go func() { started <- c.start(ctx) }()

	var st AuthState
	select {
	case st = <-asked:
	case err := <-started:
		t.Fatalf("start returned before asking: %v", err)
	}
	if st.Name != StateWaitPhoneNumber || st.Account != "offline" {
		t.Errorf("asked %+v", st)
	}

	// A request round trip through go-tdlib: getMe before login is 401.
	_, err := c.GetMe(ctx)
	var te *tg.Error
	if !errors.As(err, &te) || te.Code != 401 {
		t.Errorf("GetMe before login: %v, want telegram 401", err)
	}

	// The update pump delivers TDLib's updates: options arrive at start.
	var options int
	for options == 0 {
		select {
		case u := <-c.Updates():
			if _, ok := u.(tg.OptionChanged); ok {
				options++
			}
		case <-ctx.Done():
			t.Fatal("no updateOption arrived")
		}
	}

	// A request that needs the network stays pending until Close. TDLib
	// must answer it before it reports closed (go-tdlib would crash on a
	// later answer), and Close waits for that answer.
	pending, err := c.send(request{"testNetwork", map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}

	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case r := <-pending:
		_, err = r.decode("testNetwork")
		if !errors.As(err, &te) || tg.Classify(err) != tg.ClassRetryable {
			t.Errorf("request pending at Close: %v, want a retryable TDLib error", err)
		}
		t.Logf("request pending at Close: %v", err)
	default:
		t.Error("Close returned before the pending request was answered")
	}
	if err := <-started; !errors.Is(err, context.Canceled) {
		t.Errorf("start after Close: %v, want context.Canceled", err)
	}
	for range c.Updates() {
		// Drain: the stream must end.
	}
	if _, err := c.GetMe(ctx); !errors.Is(err, tg.ErrClosed) {
		t.Errorf("GetMe after Close: %v, want tg.ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
