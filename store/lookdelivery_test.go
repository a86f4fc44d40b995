package store_test

import (
	"crypto/sha256"
	"errors"
	"reflect"
	"testing"

	"stashd/store"
	"stashd/tg"
)

// LookDelivery answers as LookPackage and LookReconcilePending do, and
// says whether the package is sent in full to the destination: a package
// sent in full or not, to this destination or another, a reconciliation
// waiting or not, a package not in the catalogue.
func TestLookDeliveryAnswersAsTheThreeLooks(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	src := tg.ChatID(-100)
	sum := sha256.Sum256([]byte("two"))
	key := tg.MessageKey{Chat: src, Message: tg.MessageIDFromServer(1)}
	id, _, err := st.CreatePackage(ctx, store.Package{ContentHash: sum[:], Name: "two.rar", Format: "rar", TotalSize: 2,
		PartCount: 2, FileCount: 0, Origin: key, OriginTopic: 3, DetectedFormat: "zip"},
		[]store.Part{{Index: 0, FileName: "two.part1.rar", Size: 1, SHA256: sum[:], Source: key},
			{Index: 1, FileName: "two.part2.rar", Size: 1, SHA256: sum[:], Source: key}}, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	}{{id, full, true}, {id, half, false}, {id, waiting, false}, {id, -204, false}, {id + 1, full, false}, {id + 1, waiting, false}} {
		var wantPkg, gotPkg store.Package
		var wantPending, gotDone, gotPending bool
		wantDone := c.wantDone
		wantErr := st.Look(ctx, store.LookPackage(c.pkg, &wantPkg), st.LookReconcilePending(c.dest, &wantPending))
		gotErr := st.Look(ctx, st.LookDelivery(c.pkg, c.dest, &gotPkg, &gotDone, &gotPending))
		if errors.Is(wantErr, store.ErrNotFound) != errors.Is(gotErr, store.ErrNotFound) || (wantErr == nil) != (gotErr == nil) {
			t.Errorf("package %d to %d: error %v, want %v", c.pkg, c.dest, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(gotPkg, wantPkg) {
			t.Errorf("package %d to %d: package %+v, want %+v", c.pkg, c.dest, gotPkg, wantPkg)
		}
		if gotDone != wantDone || gotPending != wantPending {
			t.Errorf("package %d to %d: done %v, pending %v; want %v, %v", c.pkg, c.dest, gotDone, gotPending, wantDone, wantPending)
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
