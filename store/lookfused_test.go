package store_test

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"stashd/store"
	"stashd/tg"
)

// LookMessageAndFiles answers as LookMessageDocument, LookPackageByUniqueIDs
// and LookPackageHolding do, whatever the catalogue holds of the message
// and the files.
func TestLookMessageAndFilesAnswersAsTheThreeLooks(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	src := tg.ChatID(-100)
	key := func(n int64) tg.MessageKey { return tg.MessageKey{Chat: src, Message: tg.MessageIDFromServer(n)} }
	pkg := func(name string, uniq ...string) int64 {
		sum := sha256.Sum256([]byte(name))
		var parts []store.Part
		for i, u := range uniq {
			parts = append(parts, store.Part{Index: i, FileName: fmt.Sprintf("%s.part%d.rar", name, i+1), Size: 1, SHA256: sum[:],
				UniqueID: u, Source: key(int64(10 + i))})
		}
		id, _, err := st.CreatePackage(ctx, store.Package{ContentHash: sum[:], Name: name, Format: "rar", TotalSize: 1,
			PartCount: len(uniq), Origin: key(10)}, parts, nil)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	two := pkg("two", "a0", "a1")
	pkg("one", "b0")
	if err := st.AddRemoteFiles(ctx, two, []string{"", "a1-again"}); err != nil {
		t.Fatal(err)
	}
	edited := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	if err := st.RecordMessages(ctx, store.SourceMessage{Key: key(1), TopicID: 7, FileName: "x.part1.rar", UniqueID: "a0",
		Outcome: store.OutcomePartPending, SetKey: "x", EditDate: edited}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		msg  int64
		uniq []string
	}{
		{2, []string{"zz"}},             // nothing known
		{1, []string{"a0", "a1"}},       // the package's files in order
		{1, []string{"a1", "a0"}},       // out of order: held, not the package
		{2, []string{"a0"}},             // some of its files
		{2, []string{"a0", "a1-again"}}, // with a re-upload
		{2, []string{"a0", "b0"}},       // two packages' files
		{2, []string{"a0", "zz"}},       // one file unknown
		{2, []string{"b0"}},             // a package of one part
		{2, nil},                        // no files
		{1, []string{"a0", "a0"}},       // the same file twice
		{2, []string{"a0", "a1", "a1"}}, // more files than parts
	} {
		var wantDoc, gotDoc store.Document
		var wantAgain, wantHolding, gotAgain, gotHolding store.Found
		if err := st.Look(ctx, store.LookMessageDocument(key(c.msg), &wantDoc), store.LookPackageByUniqueIDs(c.uniq, &wantAgain),
			store.LookPackageHolding(c.uniq, &wantHolding)); err != nil {
			t.Fatal(err)
		}
		if err := st.Look(ctx, store.LookMessageAndFiles(key(c.msg), c.uniq, &gotDoc, &gotAgain, &gotHolding)); err != nil {
			t.Fatalf("message %d, files %q: %v", c.msg, c.uniq, err)
		}
		if gotDoc != wantDoc || gotAgain != wantAgain || gotHolding != wantHolding {
			t.Errorf("message %d, files %q: got %+v %+v %+v, want %+v %+v %+v", c.msg, c.uniq,
				gotDoc, gotAgain, gotHolding, wantDoc, wantAgain, wantHolding)
		}
	}
	// The cases reach every answer, so that the comparison means something.
	var doc store.Document
	var again, holding store.Found
	if err := st.Look(ctx, store.LookMessageAndFiles(key(1), []string{"a0", "a1"}, &doc, &again, &holding)); err != nil {
		t.Fatal(err)
	}
	if !doc.OK || doc.SetKey != "x" || !doc.EditDate.Equal(edited) || again != (store.Found{ID: two, OK: true}) || holding != again {
		t.Errorf("the package's own files: %+v %+v %+v; want the record, and package %d both ways", doc, again, holding, two)
	}
}
