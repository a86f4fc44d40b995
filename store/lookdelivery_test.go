package store_test

import (
	"crypto/sha256"
	"errors"
	"reflect"
	"slices"
	"testing"

	"stashd/store"
	"stashd/tg"
)

// LookDelivery answers as LookPackage and LookReconcilePending do, says
// whether the package is sent in full to the destination, and gives the
// unique ids PackageOfPart answers the package for: a package sent in
// full or not, to this destination or another, a reconciliation waiting
// or not, a package not in the catalogue.
func TestLookDeliveryAnswersAsTheThreeLooks(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	src := tg.ChatID(-100)
	sum := sha256.Sum256([]byte("two"))
	key := tg.MessageKey{Chat: src, Message: tg.MessageIDFromServer(1)}
	id, _, err := st.CreatePackage(ctx, store.Package{ContentHash: sum[:], Name: "two.rar", Format: "rar", TotalSize: 2,
		PartCount: 2, FileCount: 0, Origin: key, OriginTopic: 3, DetectedFormat: "zip"},
		[]store.Part{{Index: 0, FileName: "two.part1.rar", Size: 1, SHA256: sum[:], Source: key, UniqueID: "u-part1"},
			{Index: 1, FileName: "two.part2.rar", Size: 1, SHA256: sum[:], Source: key, UniqueID: "u-part2"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// An identical re-upload of the first part names the package too; a
	// file of another package does not.
	if err := st.AddRemoteFiles(ctx, id, []string{"u-again"}); err != nil {
		t.Fatal(err)
	}
	other := sha256.Sum256([]byte("other"))
	otherID, _, err := st.CreatePackage(ctx, store.Package{ContentHash: other[:], Name: "other.zip", Format: "zip", TotalSize: 1,
		PartCount: 1, Origin: key}, []store.Part{{Index: 0, FileName: "other.zip", Size: 1, SHA256: other[:], Source: key, UniqueID: "u-other"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	missing := otherID + 1
	const full, half, waiting = tg.ChatID(-201), tg.ChatID(-202), tg.ChatID(-203)
	for dest, parts := range map[tg.ChatID]int{full: 2, half: 1} {
		for part := range parts {
			d, _, err := st.EnsureIntent(ctx, id, dest, part, "a")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.MarkSent(ctx, d, tg.MessageIDFromServer(int64(10+part))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.RequestReconcile(ctx, []tg.ChatID{waiting}, "test"); err != nil {
		t.Fatal(err)
	}
	answers := map[string]bool{}
	for _, c := range []struct {
		pkg      int64
		dest     tg.ChatID
		wantDone bool
	}{{id, full, true}, {id, half, false}, {id, waiting, false}, {id, -204, false}, {otherID, full, false}, {missing, full, false}, {missing, waiting, false}} {
		var wantPkg, gotPkg store.Package
		var wantPending, gotDone, gotPending bool
		var gotFiles []string
		wantDone := c.wantDone
		wantErr := st.Look(ctx, store.LookPackage(c.pkg, &wantPkg), st.LookReconcilePending(c.dest, &wantPending))
		gotErr := st.Look(ctx, st.LookDelivery(c.pkg, c.dest, &gotPkg, &gotDone, &gotPending, &gotFiles))
		if errors.Is(wantErr, store.ErrNotFound) != errors.Is(gotErr, store.ErrNotFound) || (wantErr == nil) != (gotErr == nil) {
			t.Errorf("package %d to %d: error %v, want %v", c.pkg, c.dest, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(gotPkg, wantPkg) {
			t.Errorf("package %d to %d: package %+v, want %+v", c.pkg, c.dest, gotPkg, wantPkg)
		}
		if gotDone != wantDone || gotPending != wantPending {
			t.Errorf("package %d to %d: done %v, pending %v; want %v, %v", c.pkg, c.dest, gotDone, gotPending, wantDone, wantPending)
		}
		var wantFiles []string
		for _, u := range []string{"u-part1", "u-part2", "u-again", "u-other"} {
			holder, ok, err := st.PackageOfPart(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			if ok && holder == c.pkg {
				wantFiles = append(wantFiles, u)
			}
		}
		slices.Sort(gotFiles)
		slices.Sort(wantFiles)
		if !slices.Equal(gotFiles, wantFiles) {
			t.Errorf("package %d to %d: files %q, want %q", c.pkg, c.dest, gotFiles, wantFiles)
		}
		answers["done"] = answers["done"] || gotDone
		answers["not done"] = answers["not done"] || !gotDone
		answers["pending"] = answers["pending"] || gotPending
		answers["missing"] = answers["missing"] || errors.Is(gotErr, store.ErrNotFound)
	}
	if len(answers) != 4 {
		t.Errorf("the cases reached %v; want done, not done, pending and missing", answers)
	}
}
