//go:build libtdjson

package tdlib

import (
	"context"
	"errors"
	"fmt"
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

// startWaitingForPerson starts an offline client whose Authorizer waits
// for a person who never answers, and returns once it is asked. started
// delivers start's result.
func startWaitingForPerson(ctx context.Context, t *testing.T) (c *Client, asked AuthState, started <-chan error) {
	t.Helper()
	cfg := offlineConfig(t)
	ask := make(chan AuthState, 1)
	cfg.Authorizer = func(ctx context.Context, st AuthState) (string, error) {
		ask <- st
		<-ctx.Done()
		return "", ctx.Err()
	}
	cfg = cfg.withDefaults()
	if err := configureLog(cfg); err != nil {
		t.Fatal(err)
	}
	c = newClient(cfg)
	result := make(chan error, 1)
	go func() { result <- c.start(ctx) }()
	select {
	case asked = <-ask:
	case err := <-result:
		t.Fatalf("start returned before asking: %v", err)
	}
	return c, asked, result
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
	c, st, started := startWaitingForPerson(ctx, t)
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
	if err := <-started; !errors.Is(err, tg.ErrClosed) {
		t.Errorf("start after Close: %v, want tg.ErrClosed", err)
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

// TestTDLibClosesByItself closes TDLib behind the adapter's back, as a
// logout from another device does: the login waiting for a person ends, the
// update stream ends, and nothing is sent to the closed TDLib afterwards.
func TestTDLibClosesByItself(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c, _, started := startWaitingForPerson(ctx, t)

	if _, err := c.call(ctx, request{"close", map[string]any{}}); err != nil {
		t.Fatalf("close request: %v", err)
	}
	if err := <-started; !errors.Is(err, errTDLibClosing) {
		t.Errorf("start: %v, want errTDLibClosing", err)
	}
	for range c.Updates() {
		// The stream ends without Close.
	}
	if _, err := c.GetMe(ctx); !errors.Is(err, tg.ErrClosed) {
		t.Errorf("GetMe after TDLib closed: %v, want tg.ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestPumpNeverBlocks makes TDLib send far more than go-tdlib's 1000-slot
// listener buffer while nobody reads Updates. Every request still gets its
// answer (a blocked pump would stall them all until go-tdlib's 60-second
// timeout), and afterwards every update is delivered, in order.
func TestPumpNeverBlocks(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c, _, started := startWaitingForPerson(ctx, t)

	// Each setOption puts its answer and an updateOption through the
	// listener: 1200 items, 600 of them queued for Updates.
	const toggles = 600
	for i := range toggles {
		req := request{"setOption", map[string]any{
			"name":  "use_storage_optimizer",
			"value": map[string]any{"@type": "optionValueBoolean", "value": i%2 == 0},
		}}
		if _, err := c.call(ctx, req); err != nil {
			t.Fatalf("setOption %d: %v", i, err)
		}
	}

	seen := 0
	for seen < toggles {
		select {
		case u := <-c.Updates():
			o, ok := u.(tg.OptionChanged)
			if !ok || o.Name != "use_storage_optimizer" {
				continue
			}
			if want := fmt.Sprint(seen%2 == 0); o.Value != want {
				t.Fatalf("change %d: %s, want %s", seen, o.Value, want)
			}
			seen++
		case <-ctx.Done():
			t.Fatalf("%d of %d option changes delivered", seen, toggles)
		}
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-started; !errors.Is(err, tg.ErrClosed) {
		t.Errorf("start: %v", err)
	}
}

// A second TDLib client on an account's directory is refused before TDLib
// opens anything, naming the directory; a client that failed to start
// leaves the directory free.
func TestNewRefusesALockedDirectory(t *testing.T) {
	cfg := offlineConfig(t)
	lock, err := LockDir(cfg.DatabaseDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(testContext(t), cfg)
	var locked *DirLockedError
	if !errors.As(err, &locked) || locked.Dir != cfg.DatabaseDir() {
		t.Fatalf("New on a locked directory = %v, want a DirLockedError for %s", err, cfg.DatabaseDir())
	}
	lock.Unlock()

	// Offline, the default Authorizer fails the start: not logged in.
	if _, err := New(testContext(t), cfg); err == nil {
		t.Fatal("offline New succeeded")
	}
	again, err := LockDir(cfg.DatabaseDir())
	if err != nil {
		t.Fatalf("directory still locked after a failed start: %v", err)
	}
	again.Unlock()
}
