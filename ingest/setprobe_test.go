package ingest

import (
	"testing"

	"stashd/tg"
)

// The ids found to be no part of a set are remembered up to
// maxSetProbes: a daemon that assembles sets for months keeps a bounded
// memory of them, and the newest is always among them.
func TestSetProbesStayBounded(t *testing.T) {
	t.Parallel()
	p := &Pipeline{notInAlbum: map[setProbe]bool{}}
	for i := range 3 * maxSetProbes {
		probe := setProbe{"set:x", tg.MessageKey{Chat: -100, Message: tg.MessageIDFromServer(int64(i + 1))}}
		p.notMember(probe)
		if !p.notInAlbum[probe] {
			t.Fatalf("probe %d not remembered", i)
		}
		if n := len(p.notInAlbum); n > maxSetProbes {
			t.Fatalf("%d probes remembered after %d, want at most %d", n, i+1, maxSetProbes)
		}
	}
}
