package store_test

import (
	"context"
	"crypto/sha256"
	"testing"

	"stashd/archive"
	"stashd/internal/pgtest"
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

// Two instances catalogue two packages at once, one inside the other: the
// first one's commit is held up (here by a lock row another transaction
// holds) after its links were looked for, while the second commits. The
// later commit must still see the earlier package: the link is there
// once both are catalogued.
func TestContainmentOfPackagesCataloguedAtOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	a, b := openOn(t, url), openOn(t, url)
	ctx := t.Context()
	f := func(path string, size int64, crc uint32) store.FileEntry {
		return store.FileEntry{Path: path, Size: size, CRC: crc, HasCRC: true}
	}
	x, y, z := f("lib/x.txt", 10, 0x1111), f("lib/y.txt", 20, 0x2222), f("lib/z.txt", 30, 0x3333)
	pkg := func(name string, n int64, files ...store.FileEntry) store.NewPackage {
		sum := sha256.Sum256([]byte(name))
		origin := tg.MessageKey{Chat: -1001, Message: tg.MessageIDFromServer(n)}
		entries := make([]archive.Entry, len(files))
		for i, fe := range files {
			entries[i] = archive.Entry{Path: fe.Path, Size: fe.Size, CRC: fe.CRC, HasCRC: true}
		}
		sig, _ := archive.ContentSignature(entries)
		return store.NewPackage{Package: store.Package{ContentHash: sum[:], Name: name, Format: "zip", TotalSize: 100,
			PartCount: 1, FileCount: len(files), Origin: origin},
			Parts: []store.Part{{FileName: name, Size: 100, SHA256: sum[:], Source: origin}}, Files: files, Signature: sig}
	}
	lock, err := a.Lock(ctx, "h:whole")
	if err != nil {
		t.Fatal(err)
	}
	hold, err := b.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(context.Background())
	if _, err := hold.Exec(ctx, `SELECT 1 FROM package_locks WHERE name = 'h:whole' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	whole := pkg("whole.zip", 1, x, y, z)
	whole.Release = []*store.Lock{lock}
	wholeDone := make(chan error, 1)
	go func() {
		_, err := a.CataloguePackage(ctx, whole)
		wholeDone <- err
	}()
	// whole.zip's commit waits on the lock row, its links looked for.
	waitLockWaiters(t, b, 1, nil)
	smallDone := make(chan error, 1)
	go func() {
		_, err := b.CataloguePackage(ctx, pkg("small.zip", 2, x, y))
		smallDone <- err
	}()
	// small.zip commits, or waits for whole.zip's commit.
	waitLockWaiters(t, b, 2, smallDone)
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for _, done := range []chan error{wholeDone, smallDone} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var links int
	if err := a.Pool().QueryRow(ctx, `SELECT count(*) FROM package_links l
		JOIN packages i ON i.id = l.package_id JOIN packages o ON o.id = l.other_id
		WHERE i.name = 'small.zip' AND o.name = 'whole.zip' AND l.kind = 'contained_in'`).Scan(&links); err != nil {
		t.Fatal(err)
	}
	if links != 1 {
		t.Errorf("small.zip linked contained in whole.zip %d times, want once", links)
	}
}
