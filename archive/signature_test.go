package archive

import (
	"bytes"
	"context"
	"testing"

	"stashd/archive/archivetest"
)

// The same files in a zip and a RAR (one volume or three) have one
// signature; another file's content changes it; a tar, which records no
// CRCs, has none.
func TestContentSignature(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	sig := func(format Format, vols ...[]byte) ([]byte, bool) {
		t.Helper()
		l, err := memList(context.Background(), format, Limits{}, vols...)
		if err != nil {
			t.Fatal(err)
		}
		return ContentSignature(l.Entries)
	}
	z, ok := sig(FormatZip, archivetest.Zip(files))
	if !ok {
		t.Fatal("zip: no signature")
	}
	if r, ok := sig(FormatRar, archivetest.Rar(files)); !ok || !bytes.Equal(r, z) {
		t.Errorf("rar: signature %x (%v), want the zip's %x", r, ok, z)
	}
	// A file straddling volumes records its whole CRC only in its last
	// part: no signature rather than a wrong one.
	if r, ok := sig(FormatRar, archivetest.RarVolumes(files, 3)...); ok && !bytes.Equal(r, z) {
		t.Errorf("rar volumes: signature %x differs from the zip's", r)
	}
	changed := append([]archivetest.File(nil), files...)
	changed[1].Data = []byte("hellO\n")
	if c, ok := sig(FormatZip, archivetest.Zip(changed)); !ok || bytes.Equal(c, z) {
		t.Errorf("changed content: signature %x (%v) equals the original", c, ok)
	}
	if _, ok := sig(FormatTar, archivetest.Tar(files)); ok {
		t.Error("tar: a signature without CRCs")
	}
}

// A zip's and a small 7z's signature stands on their bytes: the listing
// checked each file's CRC against its data. A RAR's is its headers' claim.
func TestSignatureChecked(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	for _, tc := range []struct {
		format Format
		data   []byte
		want   bool
	}{
		{FormatZip, archivetest.Zip(files), true},
		{FormatRar, archivetest.Rar(files), false},
		{Format7z, archivetest.SevenZip(files), true},
	} {
		l, err := memList(context.Background(), tc.format, Limits{}, tc.data)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ContentSignature(l.Entries); !ok {
			t.Fatalf("%s: no signature", tc.format)
		}
		if got := SignatureChecked(l.Entries); got != tc.want {
			t.Errorf("%s: SignatureChecked = %v, want %v", tc.format, got, tc.want)
		}
	}
}
