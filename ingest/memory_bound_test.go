package ingest

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"stashd/store"
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

// The set parts a session keeps in memory are bounded the same way, and
// the newest is always kept: a part wanted after the memory started again
// is read by id.
func TestSeenPartsStayBounded(t *testing.T) {
	t.Parallel()
	p := &Pipeline{seen: map[tg.MessageKey]tg.Message{}}
	for i := range 3 * maxSeenParts {
		m := tg.Message{ChatID: -100, ID: tg.MessageIDFromServer(int64(i + 1))}
		p.keepSeen(m)
		if _, ok := p.seen[m.Key()]; !ok {
			t.Fatalf("part %d not kept", i)
		}
		if n := len(p.seen); n > maxSeenParts {
			t.Fatalf("%d parts kept after %d, want at most %d", n, i+1, maxSeenParts)
		}
	}
}

// The failures remembered to log each failing set once are bounded too:
// a set given up, or finished by another instance, is never swept again
// to forget its failure.
func TestSetFailuresStayBounded(t *testing.T) {
	t.Parallel()
	p := &Pipeline{setFailures: map[setID]string{}, log: slog.New(slog.DiscardHandler)}
	for i := range 3 * maxSetProbes {
		set := store.PendingSet{Chat: -100, SetKey: fmt.Sprintf("set:%d", i)}
		p.setFailed(set, errors.New("a part is still downloading"))
		if _, ok := p.setFailures[setID{set.Chat, set.TopicID, set.SetKey}]; !ok {
			t.Fatalf("failure of set %d not remembered", i)
		}
		if n := len(p.setFailures); n > maxSetProbes {
			t.Fatalf("%d failures remembered after %d, want at most %d", n, i+1, maxSetProbes)
		}
	}
	last := store.PendingSet{Chat: -100, SetKey: fmt.Sprintf("set:%d", 3*maxSetProbes-1)}
	p.setFailed(last, nil)
	if _, ok := p.setFailures[setID{last.Chat, last.TopicID, last.SetKey}]; ok {
		t.Error("a set that went through is still remembered as failing")
	}
}
