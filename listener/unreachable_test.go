package listener

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/tg"
)

// An account away from Telegram for 10 s is named in the log once, with
// the hint; the state metric follows TDLib's connection state; coming back
// is logged too.
func TestTelegramUnreachableNamed(t *testing.T) {
	_, st, _ := setup(t, 4, 10)
	var logs syncBuffer
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	m := NewMetrics(prometheus.NewRegistry())
	l := New(Config{Account: "a", Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: clock}, st, m)
	const away = "Telegram unreachable"

	l.HandleUpdate(tg.ConnectionStateChanged{State: tg.ConnReady})
	l.HandleUpdate(tg.ConnectionStateChanged{State: tg.ConnConnecting})
	if got := testutil.ToFloat64(m.connState.WithLabelValues("a", "connecting")); got != 1 {
		t.Errorf("connecting state gauge %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.connState.WithLabelValues("a", "ready")); got != 0 {
		t.Errorf("ready state gauge %v while connecting, want 0", got)
	}
	advance(5 * time.Second)
	l.flush(t.Context())
	if n := logs.count(away); n != 0 {
		t.Fatalf("named unreachable after 5 s:\n%s", logs.b.String())
	}
	advance(6 * time.Second)
	l.flush(t.Context())
	l.flush(t.Context())
	if n := logs.count(away); n != 1 {
		t.Fatalf("named unreachable %d times after 11 s, want once:\n%s", n, logs.b.String())
	}
	if line := logs.b.String(); !strings.Contains(line, "proxy") || !strings.Contains(line, "state=connecting") {
		t.Errorf("the line lacks the hint or the state:\n%s", line)
	}
	l.HandleUpdate(tg.ConnectionStateChanged{State: tg.ConnReady})
	if n := logs.count("Telegram reachable again"); n != 1 {
		t.Errorf("the return is not logged:\n%s", logs.b.String())
	}
}
