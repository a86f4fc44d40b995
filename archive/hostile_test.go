package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"stashd/archive/archivetest"
)

// Encryption is recorded per entry and per archive, and an archive whose
// headers are encrypted says so instead of looking empty. The 7z and zip
// fixtures are made by 7-Zip 26.02 (7zz a -p…, with -mhe=on for the headers).
func TestListEncryption(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file             string
		format           Format
		headersEncrypted bool
	}{
		{"hdr-encrypted.7z", Format7z, true},
		{"data-encrypted.7z", Format7z, false},
		{"encrypted.zip", FormatZip, false},
	}
	for _, tt := range tests {
		l, err := List(context.Background(), tt.format, []string{filepath.Join("testdata", tt.file)}, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if !l.Encrypted || l.HeadersEncrypted != tt.headersEncrypted {
			t.Errorf("%s: Encrypted %v, HeadersEncrypted %v; want true, %v", tt.file, l.Encrypted, l.HeadersEncrypted, tt.headersEncrypted)
		}
		if tt.headersEncrypted {
			if len(l.Entries) != 0 {
				t.Errorf("%s: %d entries read from encrypted headers", tt.file, len(l.Entries))
			}
			continue
		}
		files := 0
		for _, e := range l.Entries {
			if !e.Dir {
				files++
				if !e.Encrypted {
					t.Errorf("%s: entry %q not marked encrypted", tt.file, e.Path)
				}
			}
		}
		if files != 2 {
			t.Errorf("%s: %d files listed, want 2: %+v", tt.file, files, l.Entries)
		}
	}

	l, err := memList(context.Background(), FormatRar, Limits{}, archivetest.RarEncryptedHeaders(7))
	if err != nil || !l.Encrypted || !l.HeadersEncrypted || len(l.Entries) != 0 {
		t.Errorf("rar with encrypted headers: %+v, %v; want encrypted headers and no entries", l, err)
	}
	// A plain archive with no entries is empty, not encrypted.
	l, err = memList(context.Background(), FormatZip, Limits{}, archivetest.Zip(nil))
	if err != nil || l.Encrypted || l.HeadersEncrypted {
		t.Errorf("empty zip: %+v, %v; want neither flag", l, err)
	}
}

// The bytes' magic decides the format when the name lies.
func TestListDetectsFormatFromMagic(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	tests := []struct {
		named  Format
		data   []byte
		actual Format
	}{
		{FormatZip, archivetest.Rar(files), FormatRar},
		{FormatRar, archivetest.SevenZip(files), Format7z},
		{Format7z, archivetest.Zip(files), FormatZip},
		{FormatTarGz, archivetest.Tar(files), FormatTar},
		{FormatTar, archivetest.TarXz(files), FormatTarXz},
		{FormatZip, archivetest.Zip(files), FormatZip},
	}
	for _, tt := range tests {
		l, err := memList(context.Background(), tt.named, Limits{}, tt.data)
		if err != nil {
			t.Errorf("%s named %s: %v", tt.actual, tt.named, err)
			continue
		}
		if l.Format != tt.actual {
			t.Errorf("%s named %s: listed as %s", tt.actual, tt.named, l.Format)
		}
		checkEntries(t, l.Entries, wantEntries(files))
	}
	// Bytes with no magic keep the name's format (and its error).
	_, err := memList(context.Background(), FormatZip, Limits{}, []byte(strings.Repeat("not an archive ", 10)))
	wantListError(t, err, FormatZip, "", ErrMalformed)
}

// Hostile names: invalid UTF-8 and NUL are cleaned and the raw bytes kept,
// bidi overrides and names cut at the bound are flagged, and a symlink out
// of the root flags the entries written through it.
func TestListHostileNameFlags(t *testing.T) {
	t.Parallel()
	files := []archivetest.File{
		{Name: "bad\xff\xfe.txt", Data: []byte("a")},
		{Name: "nul\x00.txt", Data: []byte("b")},
		{Name: "invoice\u202Etxt.exe", Data: []byte("c")},
		{Name: strings.Repeat("n", 300), Data: []byte("d")},
		{Name: "plain.txt", Data: []byte("e")},
	}
	l, err := memList(context.Background(), FormatZip, Limits{MaxPathBytes: 200}, archivetest.Zip(files))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Path: "bad\ufffd\ufffd.txt", Size: 1, Unsafe: true, Cleaned: true, Raw: "bad\xff\xfe.txt"},
		{Path: "nul.txt", Size: 1, Unsafe: true, Cleaned: true, Raw: "nul\x00.txt"},
		{Path: "invoice\u202Etxt.exe", Size: 1, Bidi: true},
		{Path: strings.Repeat("n", 200), Size: 1, Cut: true, Raw: strings.Repeat("n", 300)},
		{Path: "plain.txt", Size: 1},
	}
	if len(l.Entries) != len(want) {
		t.Fatalf("entries %+v", l.Entries)
	}
	for i := range want {
		got := l.Entries[i]
		got.CRC, got.HasCRC, got.CRCChecked = 0, false, false // the names are under test here
		if got != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, l.Entries[i], want[i])
		}
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "docs/link", Linkname: "../../etc", Typeflag: tar.TypeSymlink},
		{Name: "docs/link/x", Size: 1, Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "docs/link", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "docs/inner", Linkname: "../readme", Typeflag: tar.TypeSymlink},
		{Name: "docs/inner/y", Size: 1, Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "docs/linked.txt", Size: 1, Typeflag: tar.TypeReg, Mode: 0o644},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte{'z'})
		}
	}
	tw.Close()
	l, err = memList(context.Background(), FormatTar, Limits{}, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	escapes := map[string]bool{"docs/link": true, "docs/link/x": true}
	for _, e := range l.Entries {
		if e.LinkEscape != escapes[e.Path] || e.Unsafe != escapes[e.Path] {
			t.Errorf("entry %q: LinkEscape %v, Unsafe %v; want %v", e.Path, e.LinkEscape, e.Unsafe, escapes[e.Path])
		}
	}
}
