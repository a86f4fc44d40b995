package archive

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"stashd/archive/archivetest"
)

// fuzzFormats are the formats FuzzList picks from with its first argument.
var fuzzFormats = [...]Format{FormatZip, FormatTar, FormatTarGz, Format7z, FormatRar, FormatTarXz, FormatTarZst, FormatTarBz2}

// FuzzList feeds arbitrary bytes, cut into one to three parts, to every
// walker. Nothing may panic (a recovered panic surfaces as an "internal
// error" ListError), limits must hold, and every stored path must be clean.
func FuzzList(f *testing.F) {
	files := append(sampleFiles()[:3], archivetest.TraversalFiles()[:4]...)
	seeds := map[Format][]byte{
		FormatZip:    archivetest.Zip(files),
		FormatTar:    archivetest.Tar(files),
		FormatTarGz:  archivetest.TarGz(files),
		Format7z:     archivetest.SevenZip(files),
		FormatRar:    archivetest.Rar(files),
		FormatTarXz:  archivetest.TarXz(files),
		FormatTarZst: archivetest.TarZst(files),
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "sample.tar.bz2")); err == nil {
		seeds[FormatTarBz2] = b
	}
	for i, format := range fuzzFormats {
		if data, ok := seeds[format]; ok {
			f.Add(uint8(i), data)
			f.Add(uint8(i+len(fuzzFormats)), data) // the same, in two parts
		}
	}
	f.Add(uint8(0), archivetest.Corrupt(archivetest.ZipClaimMillion, files))
	f.Add(uint8(0), archivetest.Corrupt(archivetest.ZipTruncated, files))
	f.Add(uint8(0), archivetest.ZipSplit(files, 2)[1])
	f.Add(uint8(3), archivetest.Corrupt(archivetest.SevenZipHugeHeader, files))
	f.Add(uint8(4), archivetest.RarVolumes(files, 2)[0])
	f.Add(uint8(4), rar4Volumes(files, 1)[0])

	const maxEntries = 1000
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		format := fuzzFormats[int(sel)%len(fuzzFormats)]
		nparts := int(sel)/len(fuzzFormats)%3 + 1
		lim := Limits{MaxEntries: maxEntries, MaxHeaderBytes: 1 << 20, MaxPathBytes: 256}
		l, err := memList(context.Background(), format, lim, archivetest.Split(data, nparts)...)
		if err != nil {
			var le *ListError
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T) is not a *ListError", err, err)
			}
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("walker panicked: %v", err)
			}
		}
		if len(l.Entries) > maxEntries {
			t.Fatalf("%d entries over the limit", len(l.Entries))
		}
		for _, e := range l.Entries {
			if len(e.Path) > 256 || !utf8.ValidString(e.Path) || strings.ContainsFunc(e.Path, unicode.IsControl) {
				t.Fatalf("unclean path %q", e.Path)
			}
		}
	})
}
