package store

import "testing"

// FuzzSearchCursor feeds arbitrary text to the cursor decoder: it never
// panics, refuses what encodeCursor cannot have made, and what it accepts
// encodes back to a cursor that decodes to the same place.
func FuzzSearchCursor(f *testing.F) {
	for _, s := range []string{"", encodeCursor(0, 1), encodeCursor(3, 9223372036854775807), "MC4xMjM", "MC4w", "LTEuMQ",
		"!!!", "MS4x=", "MS4xLjE", "OTk5OTk5OTk5OTk5OTk5OTk5OTkuMQ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, c string) {
		rank, id, err := decodeCursor(c)
		if err != nil {
			if err != ErrBadCursor {
				t.Fatalf("decodeCursor(%q): error %v, want ErrBadCursor", c, err)
			}
			return
		}
		if rank < 0 || id <= 0 {
			t.Fatalf("decodeCursor(%q) accepted rank %d, id %d", c, rank, id)
		}
		r2, id2, err := decodeCursor(encodeCursor(rank, id))
		if err != nil || r2 != rank || id2 != id {
			t.Fatalf("cursor (%d, %d) re-encoded decodes to (%d, %d, %v)", rank, id, r2, id2, err)
		}
	})
}
