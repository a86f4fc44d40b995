package ingest_test

import (
	"testing"

	"stashd/archive/archivetest"
	"stashd/sim/tgsim"
	"stashd/store"
)

// An edit that replaces a source message's document keeps the message id:
// the new archive must still be mirrored, and one whose bytes are known
// must be recognised as a duplicate.
func TestReplacedDocumentIsMirrored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	src := e.src["a"]
	posted := e.world.Post(src, 0, tgsim.Post{FileName: "v1.tar", Data: tarOf("a.txt", "first")})
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	if n := len(e.delivered()); n != 1 {
		t.Fatalf("delivered %d documents, want 1", n)
	}

	edit := e.world.EditMessageMedia(src, posted.ID, tgsim.Post{FileName: "v2.tar", Data: tarOf("a.txt", "second")})
	if edit.OldUniqueID == edit.NewUniqueID {
		t.Fatal("the edit kept the file")
	}
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	d := e.delivered()
	if len(d) != 2 || d[1].Document.File.UniqueID != edit.NewUniqueID {
		t.Fatalf("destination holds %d documents; want the first and the replacement", len(d))
	}
	// Handled again with the same document: layer 1 answers.
	mustHandle(t, p, e.view(c, posted), store.OutcomeDuplicate)
	if n, err := e.st.ReplacedDocuments(e.ctx); err != nil || n != 1 {
		t.Fatalf("replaced documents = %d, %v; want 1", n, err)
	}

	// A replacement with bytes already catalogued is linked, not sent.
	other := e.world.Post(src, 0, tgsim.Post{FileName: "w.tar", Data: archivetest.Tar([]archivetest.File{{Name: "x", Data: []byte("1")}})})
	e.world.EditMessageMedia(src, other.ID, tgsim.Post{FileName: "v1-again.tar", Data: tarOf("a.txt", "first")})
	mustHandle(t, p, e.view(c, other), store.OutcomeDuplicate)
	if n := len(e.delivered()); n != 2 {
		t.Fatalf("delivered %d documents, want still 2", n)
	}
}
