package listener

import (
	"testing"

	"stashd/store"
)

// BenchmarkHandleUpdate measures the pump's cost per new-message event on
// the hot path: continuity check, in-flight dedup, non-blocking enqueue,
// and a worker's Done moving the low watermark.
func BenchmarkHandleUpdate(b *testing.B) {
	l, _, _ := setupTB(b, 1024, 0)
	l.CaughtUp(chat, store.Era{}, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s := int64(i + 1)
		l.HandleUpdate(doc(s))
		l.Done(<-l.Queue())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if low, _, _ := l.Watermark(chat); low != int64(b.N) {
		b.Fatalf("watermark %d after %d events", low, b.N)
	}
}
