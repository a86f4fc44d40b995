package store_test

import (
	"crypto/sha256"
	"testing"

	"stashd/store"
	"stashd/tg"
)

// A package whose files (path, size, CRC) are a strict subset of another's
// is linked contained_in it, whichever is looked at; equal sets are not
// containment, and a package with a file of unknown CRC takes no part.
// Search shows the links from both sides.
func TestLinkContainment(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	n := int64(0)
	mk := func(name string, files ...store.FileEntry) int64 {
		t.Helper()
		n++
		sum := sha256.Sum256([]byte(name))
		origin := tg.MessageKey{Chat: -1001, Message: tg.MessageIDFromServer(n)}
		id, _, err := st.CreatePackage(ctx, store.Package{ContentHash: sum[:], Name: name, Format: "zip", TotalSize: 100,
			PartCount: 1, FileCount: len(files), Origin: origin},
			[]store.Part{{FileName: name, Size: 100, SHA256: sum[:], Source: origin}}, files)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	f := func(path string, size int64, crc uint32) store.FileEntry {
		return store.FileEntry{Path: path, Size: size, CRC: crc, HasCRC: true}
	}
	x, y, z := f("lib/x.txt", 10, 0x1111), f("lib/y.txt", 20, 0x2222), f("lib/z.txt", 30, 0x3333)
	dir := store.FileEntry{Path: "lib", Dir: true}
	small := mk("small.zip", dir, x, y)
	whole := mk("whole.zip", dir, x, y, z)
	same := mk("same-as-small.7z", x, y)
	unknown := mk("unknown.zip", store.FileEntry{Path: "lib/x.txt", Size: 10})
	otherCRC := mk("other-crc.zip", f("lib/x.txt", 10, 0x9999))

	if got, err := st.LinkContainment(ctx, whole); err != nil || got != 2 {
		t.Fatalf("containment of whole.zip: %d links, %v; want small and same-as-small inside it", got, err)
	}
	for _, id := range []int64{unknown, otherCRC} {
		if got, err := st.LinkContainment(ctx, id); err != nil || got != 0 {
			t.Errorf("package %d: %d links, %v; want none", id, got, err)
		}
	}
	for _, id := range []int64{small, same} {
		links, err := st.PackageLinks(ctx, id)
		if err != nil || len(links) != 1 || links[0].Other != whole || links[0].Kind != store.LinkContainedIn {
			t.Errorf("links of %d = %+v, %v; want contained in whole.zip (%d)", id, links, err, whole)
		}
	}
	// Linking again from the smaller side adds nothing.
	if got, err := st.LinkContainment(ctx, small); err != nil || got != 0 {
		t.Errorf("containment of small.zip again: %d links, %v", got, err)
	}

	page, err := st.Search(ctx, store.SearchQuery{Text: "whole.zip"})
	if err != nil || len(page.Hits) != 1 {
		t.Fatalf("search whole.zip: %+v, %v", page, err)
	}
	want := map[int64]bool{small: true, same: true}
	for _, l := range page.Hits[0].Links {
		if l.Relation == "contains" {
			delete(want, l.Other)
		}
	}
	if len(want) != 0 {
		t.Errorf("search shows whole.zip's links %+v; missing contains %v", page.Hits[0].Links, want)
	}
	page, err = st.Search(ctx, store.SearchQuery{Text: "small.zip"})
	if err != nil || len(page.Hits) != 1 || len(page.Hits[0].Links) != 1 ||
		page.Hits[0].Links[0] != (store.HitLink{Relation: "contained in", Other: whole, OtherName: "whole.zip"}) {
		t.Errorf("search small.zip: %+v, %v; want contained in whole.zip", page.Hits, err)
	}
}
