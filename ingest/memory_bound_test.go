package ingest

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"stashd/store"
	"stashd/tg"
)

// The pipeline's memories of sets stay bounded however many sets a daemon
// assembles over months, and each keeps its newest entry: the parts it
// keeps (seen), the ids found to be no part of a set (notInAlbum), and the
// failures remembered to log each failing set once (setFailures).
func TestSetMemoriesStayBounded(t *testing.T) {
	t.Parallel()
	set := func(i int) store.PendingSet { return store.PendingSet{Chat: -100, SetKey: fmt.Sprintf("set:%d", i)} }
	msg := func(i int) tg.MessageKey {
		return tg.MessageKey{Chat: -100, Message: tg.MessageIDFromServer(int64(i + 1))}
	}
	for _, c := range []struct {
		name string
		put  func(p *Pipeline, i int)
		has  func(p *Pipeline, i int) bool
		size func(p *Pipeline) int
	}{
		{"seen",
			func(p *Pipeline, i int) { p.keepSeen(tg.Message{ChatID: -100, ID: msg(i).Message}) },
			func(p *Pipeline, i int) bool { _, ok := p.seen[msg(i)]; return ok },
			func(p *Pipeline) int { return len(p.seen) }},
		{"notInAlbum",
			func(p *Pipeline, i int) { p.notMember(setProbe{"set:x", msg(i)}) },
			func(p *Pipeline, i int) bool { return p.notInAlbum[setProbe{"set:x", msg(i)}] },
			func(p *Pipeline) int { return len(p.notInAlbum) }},
		{"setFailures",
			func(p *Pipeline, i int) { p.setFailed(set(i), errors.New("a part is still downloading")) },
			func(p *Pipeline, i int) bool { _, ok := p.setFailures[setID{-100, 0, set(i).SetKey}]; return ok },
			func(p *Pipeline) int { return len(p.setFailures) }},
	} {
		p := &Pipeline{seen: map[tg.MessageKey]tg.Message{}, notInAlbum: map[setProbe]bool{}, setFailures: map[setID]string{},
			log: slog.New(slog.DiscardHandler)}
		for i := range 3 * maxRemembered {
			c.put(p, i)
			if !c.has(p, i) {
				t.Fatalf("%s: entry %d not kept", c.name, i)
			}
			if n := c.size(p); n > maxRemembered {
				t.Fatalf("%s: %d entries after %d, want at most %d", c.name, n, i+1, maxRemembered)
			}
		}
	}
	// A set that went through is forgotten at once.
	p := &Pipeline{setFailures: map[setID]string{}, log: slog.New(slog.DiscardHandler)}
	p.setFailed(set(1), errors.New("a part is still downloading"))
	p.setFailed(set(1), nil)
	if len(p.setFailures) != 0 {
		t.Error("a set that went through is still remembered as failing")
	}
}
