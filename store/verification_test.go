package store_test

import (
	"slices"
	"testing"

	"stashd/store"
	"stashd/tg"
)

// A posted name's flags are recorded with its message, whatever records it;
// a package's verification and a rejected copy are kept.
func TestNameFlagsAndVerification(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	names := map[tg.MessageKey]string{
		{Chat: -5, Message: 1}: "plain.zip",
		{Chat: -5, Message: 2}: "new\nline.zip",
		{Chat: -5, Message: 3}: "invoice\u202efdp.zip",
		{Chat: -5, Message: 4}: "zero\u200bwidth\u2066.zip",
	}
	want := map[tg.MessageKey][]string{
		{Chat: -5, Message: 2}: {"control"},
		{Chat: -5, Message: 3}: {"bidi"},
		{Chat: -5, Message: 4}: {"bidi", "zero-width"},
	}
	for k, n := range names {
		if err := st.RecordMessages(ctx, store.SourceMessage{Key: k, FileName: n, Outcome: store.OutcomeNotArchive}); err != nil {
			t.Fatal(err)
		}
	}
	for k := range names {
		got, err := st.NameFlags(ctx, k)
		if err != nil || !slices.Equal(got, want[k]) {
			t.Errorf("%q: flags %q, %v; want %q", names[k], got, err, want[k])
		}
	}

	id := onePartPackage(t, st, "v1", 9, 1)
	v := store.Verification{Broken: "zip: truncated", NameLied: true, Suspicious: []string{"hidden end record"}}
	if err := st.SetVerification(ctx, id, v); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetVerification(ctx, id)
	if err != nil || got.Verified || got.Broken != v.Broken || !got.NameLied || !slices.Equal(got.Suspicious, v.Suspicious) {
		t.Errorf("verification %+v, %v; want %+v", got, err, v)
	}
	if err := st.RecordRejected(ctx, tg.MessageKey{Chat: -5, Message: 9}, id, "v.part2.rar", "a copy that does not make the set valid"); err != nil {
		t.Fatal(err)
	}
	var reason string
	if err := st.Pool().QueryRow(ctx, `SELECT reason FROM rejected_parts WHERE message_id = 9 AND package_id = $1`, id).Scan(&reason); err != nil || reason == "" {
		t.Errorf("rejected part: %q, %v", reason, err)
	}
}

// Packages with one content signature are found by it, and linked.
func TestPackageLinks(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	first, second := onePartPackage(t, st, "a", 1, 1), onePartPackage(t, st, "b", 2, 2)
	sig := []byte("same files")
	if err := st.SetContentSignature(ctx, first, sig); err != nil {
		t.Fatal(err)
	}
	if id, ok, err := st.PackageBySignature(ctx, sig, second); err != nil || !ok || id != first {
		t.Fatalf("by signature: %d, %v, %v; want %d", id, ok, err, first)
	}
	if _, ok, err := st.PackageBySignature(ctx, sig, first); err != nil || ok {
		t.Errorf("by signature, itself excepted: %v, %v", ok, err)
	}
	for range 2 {
		if err := st.LinkPackages(ctx, second, first, store.LinkRepack); err != nil {
			t.Fatal(err)
		}
	}
	links, err := st.PackageLinks(ctx, second)
	if err != nil || len(links) != 1 || links[0] != (store.PackageLink{Other: first, Kind: store.LinkRepack}) {
		t.Errorf("links %+v, %v", links, err)
	}
}
