package bench

import (
	"testing"
	"time"
)

// A count is polled seldom while much is left and every 2 ms near its end.
func TestPollGapShrinksTowardTheEnd(t *testing.T) {
	for _, c := range []struct {
		n, want int
		elapsed time.Duration
		gap     time.Duration
	}{
		{0, 10000, time.Second, 20 * time.Millisecond},                // nothing counted yet
		{1000, 10000, time.Second, 250 * time.Millisecond},            // 9 s left: capped
		{5000, 10000, 400 * time.Millisecond, 100 * time.Millisecond}, // 400 ms left
		{9900, 10000, 6 * time.Second, 15151515 * time.Nanosecond},    // 60.6 ms left
		{9999, 10000, 6 * time.Second, 2 * time.Millisecond},          // 0.6 ms left: the floor
	} {
		if got := pollGap(c.n, c.want, c.elapsed); got != c.gap {
			t.Errorf("pollGap(%d, %d, %s) = %s, want %s", c.n, c.want, c.elapsed, got, c.gap)
		}
	}
}
