package listener

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// syncBuffer is a log sink safe for the listener's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// A full ingest queue is logged once per episode, at Warn, with the
// account and the source marked dirty; it is logged again only after the
// queue drained below half and filled up again.
func TestQueueFullLoggedOncePerEpisode(t *testing.T) {
	_, st, _ := setup(t, 4, 10)
	src, err := st.GetSource(t.Context(), chat)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	l := New(Config{Account: "a", QueueCapacity: 4, Logger: log}, st, NewMetrics(prometheus.NewRegistry()))
	l.Watch(src)
	const full = "ingest queue full"

	s := int64(11)
	post := func(n int) {
		for range n {
			l.HandleUpdate(doc(s))
			s++
		}
	}
	take := func(n int) {
		for range n {
			<-l.Queue()
		}
	}
	post(4 + 20) // 4 queued, 20 dropped
	if n := logs.count(full); n != 1 {
		t.Fatalf("queue full logged %d times in one episode, want 1:\n%s", n, logs.b.String())
	}
	line := logs.b.String()
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "account=a") || !strings.Contains(line, "source marked dirty") {
		t.Errorf("queue full line lacks the level, the account or the dirty mark:\n%s", line)
	}
	if !l.IsDirty(chat) {
		t.Error("the source is not dirty after the overflow")
	}
	take(1) // still above half
	post(5)
	if n := logs.count(full); n != 1 {
		t.Fatalf("queue full logged %d times before the queue drained below half, want 1", n)
	}
	take(4) // empty: the episode is over
	post(10)
	if n := logs.count(full); n != 2 {
		t.Fatalf("queue full logged %d times after a second episode, want 2:\n%s", n, logs.b.String())
	}
}
