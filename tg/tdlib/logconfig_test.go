package tdlib

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TDLib's log is configured once per process, however many clients start
// and however concurrently: td_execute must not run while clients receive.
func TestLogConfiguredOncePerProcess(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	var methods sync.Map
	l := &logConfig{exec: func(r request) error {
		calls.Add(1)
		methods.Store(r.Method, true)
		return nil
	}}
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			cfg := Config{TDLibLogVerbosity: 1 + i%2, Logger: logger}
			if err := l.configure(cfg); err != nil {
				t.Errorf("configure: %v", err)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 2 {
		t.Errorf("%d td_execute calls, want 2 (verbosity and stream, once)", n)
	}
	for _, m := range []string{"setLogVerbosityLevel", "setLogStream"} {
		if _, ok := methods.Load(m); !ok {
			t.Errorf("%s never executed", m)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "configured once per process") {
		t.Errorf("a client with other log settings was not told they were ignored; log: %q", logs.String())
	}
}

// A failure to configure the log is reported to every client, not retried
// behind their backs.
func TestLogConfigurationFailureSticks(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	l := &logConfig{exec: func(request) error { calls.Add(1); return errors.New("bad stream") }}
	for range 3 {
		if err := l.configure(Config{}); err == nil || !strings.Contains(err.Error(), "bad stream") {
			t.Errorf("configure = %v, want the first failure", err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d td_execute calls, want 1", n)
	}
}

func TestRequestTimeoutBelowGoTDLibs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want time.Duration }{
		{0, MaxRequestTimeout},
		{2 * time.Minute, MaxRequestTimeout},
		{time.Second, time.Second},
	} {
		if got := (Config{RequestTimeout: tc.in}).withDefaults().RequestTimeout; got != tc.want {
			t.Errorf("RequestTimeout %s: got %s, want %s", tc.in, got, tc.want)
		}
	}
	if MaxRequestTimeout >= 60*time.Second {
		t.Errorf("MaxRequestTimeout %s is not below go-tdlib's 60 s response timeout", MaxRequestTimeout)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
