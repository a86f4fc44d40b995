package tg

import "testing"

func TestServerFloor(t *testing.T) {
	for _, tc := range []struct {
		id   MessageID
		want int64
	}{
		{0, 0},
		{MessageIDFromServer(7), 7},
		{MessageIDFromServer(7) + 3, 7}, // a message being sent after 7
		{5, 0},                          // local, before any server message
	} {
		if got := tc.id.ServerFloor(); got != tc.want {
			t.Errorf("ServerFloor(%d) = %d, want %d", tc.id, got, tc.want)
		}
	}
}
