package ingest_test

import (
	"fmt"
	"testing"

	"stashd/archive/archivetest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// BenchmarkHandleArchive measures the whole ingest path for one new archive
// (lookups, lock, download, hash, listing, catalogue, delivery) against the
// simulator and a real PostgreSQL, and the cost of recognising it again.
func BenchmarkHandleArchive(b *testing.B) {
	e := newEnvB(b)
	p, c := e.pipeline("a")
	msgs := make([]tg.Message, b.N)
	for i := range b.N {
		data := archivetest.Zip([]archivetest.File{{Name: fmt.Sprintf("dir/file-%d.txt", i), Data: fmt.Appendf(nil, "payload %d", i)}})
		msgs[i] = e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("a-%d.tar", i), Data: data}))
	}
	b.ResetTimer()
	for i := range b.N {
		if out, err := p.Handle(e.ctx, msgs[i]); err != nil || out != store.OutcomePackage {
			b.Fatalf("handle: %v %v", out, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "archives/s")
}

// BenchmarkHandleKnown measures layer 1: a message already catalogued.
func BenchmarkHandleKnown(b *testing.B) {
	e := newEnvB(b)
	p, c := e.pipeline("a")
	m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "a.tar", Data: archivetest.Tar([]archivetest.File{{Name: "x", Data: []byte("x")}})}))
	if _, err := p.Handle(e.ctx, m); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if out, err := p.Handle(e.ctx, m); err != nil || out != store.OutcomeDuplicate {
			b.Fatalf("handle: %v %v", out, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "messages/s")
}
