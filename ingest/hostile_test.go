package ingest_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// hostileTar is a tar whose entry names PostgreSQL cannot store as they are
// (invalid UTF-8), with a bidi override and a symlink out of the root that
// a later entry is written through.
func hostileTar(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "bad\xff\xfe.txt", Size: 1, Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "invoice\u202Etxt.exe", Size: 1, Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "up", Linkname: "../../etc", Typeflag: tar.TypeSymlink},
		{Name: "up/x", Size: 1, Typeflag: tar.TypeReg, Mode: 0o644},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte{'z'})
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type fileRow struct {
	path, raw string
	unsafe    bool
	flags     []string
}

func packageFiles(t *testing.T, e *env, name string) (store.Package, []fileRow) {
	t.Helper()
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		if p.Name != name {
			continue
		}
		full, err := e.st.GetPackage(e.ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := e.st.Pool().Query(e.ctx, `SELECT path, path_raw, unsafe, flags FROM package_files WHERE package_id = $1 ORDER BY ord`, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []fileRow
		for rows.Next() {
			var f fileRow
			if err := rows.Scan(&f.path, &f.raw, &f.unsafe, &f.flags); err != nil {
				t.Fatal(err)
			}
			out = append(out, f)
		}
		return full, out
	}
	t.Fatalf("no package named %q", name)
	return store.Package{}, nil
}

// A document whose name holds NUL and invalid UTF-8 is catalogued under a
// cleaned name with its raw bytes kept and flagged, instead of failing the
// write (and its retries) for ever; the entry names get the same treatment
// and the listing's flags reach the catalogue.
func TestHostileNamesAreCataloguedCleaned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	rawName := "re\x00port\xff.tar"
	m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: rawName, Data: hostileTar(t)}))
	mustHandle(t, p, m, store.OutcomePackage)

	var name, raw string
	var cleaned bool
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT file_name, file_name_raw, file_name_cleaned FROM source_messages
		WHERE chat_id = $1 AND message_id = $2`, int64(m.ChatID), int64(m.ID)).Scan(&name, &raw, &cleaned); err != nil {
		t.Fatal(err)
	}
	if name != "re\ufffdport\ufffd.tar" || raw != hex.EncodeToString([]byte(rawName)) || !cleaned {
		t.Errorf("source message name %q raw %q cleaned %v; want the cleaned name, the raw bytes in hex, flagged", name, raw, cleaned)
	}
	pkg, files := packageFiles(t, e, "re\ufffdport\ufffd.tar")
	if pkg.ListingError != "" {
		t.Errorf("listing error %q", pkg.ListingError)
	}
	want := []fileRow{
		{path: "bad\ufffd\ufffd.txt", raw: hex.EncodeToString([]byte("bad\xff\xfe.txt")), unsafe: true, flags: []string{store.FlagCleaned}},
		{path: "invoice\u202Etxt.exe", flags: []string{store.FlagBidi}},
		{path: "up", unsafe: true, flags: []string{store.FlagLinkEscape}},
		{path: "up/x", unsafe: true, flags: []string{store.FlagLinkEscape}},
	}
	if len(files) != len(want) {
		t.Fatalf("files %+v, want %+v", files, want)
	}
	for i := range want {
		if files[i].path != want[i].path || files[i].raw != want[i].raw || files[i].unsafe != want[i].unsafe || !slices.Equal(files[i].flags, want[i].flags) {
			t.Errorf("file %d = %+v, want %+v", i, files[i], want[i])
		}
	}
	if n := len(e.delivered()); n != 1 {
		t.Errorf("delivered %d documents, want 1", n)
	}
}

// Encryption reaches the catalogue: an archive with encrypted headers is
// recorded as such, not as an empty archive, and the format the bytes show
// wins over a lying name.
func TestEncryptionAndDetectedFormatCatalogued(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	post := func(name, fixture string) tg.Message {
		data, err := os.ReadFile("../archive/testdata/" + fixture)
		if err != nil {
			t.Fatal(err)
		}
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: data}))
		mustHandle(t, p, m, store.OutcomePackage)
		return m
	}
	post("secret.7z", "hdr-encrypted.7z")
	post("holiday.tar.gz", "encrypted.zip")

	pkg, files := packageFiles(t, e, "secret.7z")
	if !pkg.HeadersEncrypted || !pkg.Encrypted || pkg.FileCount != 0 || pkg.ListingError != "" {
		t.Errorf("header-encrypted 7z = %+v; want encrypted headers, no files, no error", pkg)
	}
	if len(files) != 0 {
		t.Errorf("files %+v from encrypted headers", files)
	}
	pkg, files = packageFiles(t, e, "holiday.tar.gz")
	if pkg.Format != "zip" || pkg.DetectedFormat != "zip" || !pkg.Encrypted || pkg.HeadersEncrypted || pkg.ListingError != "" {
		t.Errorf("zip named .tar.gz = %+v; want listed as the zip it is, encrypted", pkg)
	}
	encrypted := 0
	for _, f := range files {
		if slices.Contains(f.flags, store.FlagEncrypted) {
			encrypted++
		}
	}
	if encrypted != 2 {
		t.Errorf("%d entries flagged encrypted, want 2: %+v", encrypted, files)
	}
}

// The archives of an album are listed under their file names, which the
// poster chose: the joined paths are cleaned and flagged like any entry
// name, so an album member named to climb out of the root, or holding
// control characters, cannot put a path in the catalogue that a stored name
// could not.
func TestAlbumMemberNamesAreCleaned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	for _, name := range []string{"../../etc.zip", "bell\x07.zip"} {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: zipOf("f.txt", name), AlbumID: 31}))
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the album completed", res, err)
	}
	_, files := packageFiles(t, e, "../../etc.zip")
	want := []fileRow{
		{path: "../../etc.zip/f.txt", unsafe: true},
		{path: "bell.zip/f.txt", raw: hex.EncodeToString([]byte("bell\x07.zip/f.txt")), unsafe: true, flags: []string{store.FlagCleaned}},
	}
	if len(files) != len(want) {
		t.Fatalf("files %+v, want %+v", files, want)
	}
	for i := range want {
		if files[i].path != want[i].path || files[i].raw != want[i].raw || files[i].unsafe != want[i].unsafe || !slices.Equal(files[i].flags, want[i].flags) {
			t.Errorf("file %d = %+v, want %+v", i, files[i], want[i])
		}
	}
}

// A document whose name shows an archive's (x.zip followed by a zero-width
// space, x.tar.gz. with the trailing dot Windows drops) is downloaded and
// catalogued by its bytes, not recorded as no archive and never mirrored;
// and what the listing finds the structure hiding (a second tar after the
// first one's end, in its own gzip member) reaches the catalogue as
// suspicious, with the package verified and delivered.
func TestInvisibleSuffixesAndHiddenTarsCatalogued(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	tarOf := func(name string) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: name, Size: 1, Typeflag: tar.TypeReg, Mode: 0o644})
		tw.Write([]byte{'x'})
		tw.Close()
		return buf.Bytes()
	}
	for _, post := range []tgsim.Post{
		{FileName: "shown.zip\u200b", Data: zipOf("f.txt", "shown")},
		{FileName: "hidden.tar.gz.", Data: append(gz(tarOf("shown.txt")), gz(tarOf("hidden.txt"))...)},
	} {
		m := e.view(c, e.world.Post(e.src["a"], 0, post))
		mustHandle(t, p, m, store.OutcomePackage)
	}
	pkg, files := packageFiles(t, e, "shown.zip\u200b")
	if pkg.Format != "zip" || len(files) != 1 || files[0].path != "f.txt" {
		t.Errorf("zip with a zero-width suffix = %+v, files %+v", pkg, files)
	}
	pkg, files = packageFiles(t, e, "hidden.tar.gz.")
	v, err := e.st.GetVerification(e.ctx, pkg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Format != "tar.gz" || len(files) != 1 || !v.Verified || len(v.Suspicious) != 1 || !strings.Contains(v.Suspicious[0], "another tar") {
		t.Errorf("two tars in two gzip members = %+v, files %+v, verification %+v", pkg, files, v)
	}
	if n := len(e.delivered()); n != 2 {
		t.Errorf("delivered %d documents, want 2", n)
	}
}
