package archive

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"stashd/archive/archivetest"
)

// exeStub is the head of a Windows executable, as a self-extractor's stub
// begins, followed by stub bytes that must not be taken for an archive.
func exeStub() []byte {
	stub := append([]byte("MZ\x90\x00"), bytes.Repeat([]byte("stub code "), 3000)...)
	return stub
}

// The bytes decide the format, whatever the name: a zip without
// extension, a self-extractor carrying a zip or a 7z, a tar.lz4 named
// .bin, and a rar named .zip; Listing says the name lied.
func TestListByMagic(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	cases := []struct {
		name   string
		named  Format
		data   []byte
		want   Format
		sfx    bool
		offset int64
	}{
		{"zip without extension", FormatNone, archivetest.Zip(files), FormatZip, false, 0},
		{"sfx exe with zip", FormatNone, append(exeStub(), archivetest.Zip(files)...), FormatZip, true, 0},
		{"sfx exe with 7z", FormatNone, append(exeStub(), archivetest.SevenZip(files)...), Format7z, true, int64(len(exeStub()))},
		{"tar.lz4 named .bin", FormatNone, archivetest.TarLz4(files), FormatTarLz4, false, 0},
		{"rar named .zip", FormatZip, archivetest.Rar(files), FormatRar, false, 0},
		{"7z named .tar.gz", FormatTarGz, archivetest.SevenZip(files), Format7z, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if d := Detect(bytes.NewReader(c.data), int64(len(c.data))); d.Format != c.want || d.SFX != c.sfx {
				t.Errorf("Detect = %+v, want %s (sfx %v)", d, c.want, c.sfx)
			}
			l, err := memList(context.Background(), c.named, Limits{}, c.data)
			if err != nil {
				t.Fatal(err)
			}
			if l.Format != c.want || !l.NameLied || l.SFX != c.sfx || l.Offset != c.offset {
				t.Errorf("format %s lied %v sfx %v offset %d, want %s true %v %d", l.Format, l.NameLied, l.SFX, l.Offset, c.want, c.sfx, c.offset)
			}
			checkEntries(t, l.Entries, wantEntries(files))
		})
	}
	// A name that tells the truth did not lie.
	l, err := memList(context.Background(), FormatTarLz4, Limits{}, archivetest.TarLz4(files))
	if err != nil || l.NameLied || l.Format != FormatTarLz4 {
		t.Errorf("tar.lz4 named .tar.lz4: %+v, %v", l, err)
	}
	// An executable without an archive is none.
	if d := Detect(bytes.NewReader(exeStub()), int64(len(exeStub()))); d.Format != FormatNone || !d.SFX {
		t.Errorf("bare exe: %+v", d)
	}
}

// Zero bytes are never an archive, whatever the name says.
func TestListEmptyFile(t *testing.T) {
	t.Parallel()
	for _, f := range []Format{FormatZip, FormatRar, Format7z, FormatTar, FormatTarGz, FormatTarLz4} {
		_, err := memList(context.Background(), f, Limits{}, nil)
		if !errors.Is(err, ErrEmpty) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: error %v, want ErrEmpty", f, err)
		}
	}
	if d := Detect(bytes.NewReader(nil), 0); d.Format != FormatNone {
		t.Errorf("Detect of zero bytes: %+v", d)
	}
}

// RAR's signature inside a program (p7zip's own 7z.so holds it as data)
// is no archive: the header after it must check out, as a 7z's start
// header must. A self-extractor whose stub holds the signature before its
// archive is listed from the archive's own.
func TestRarSignatureInsideAStub(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	stub := append([]byte("\x7fELF\x02\x01\x01\x00"), bytes.Repeat([]byte("code "), 500)...)
	stub = append(stub, "Rar!\x1a\x07\x00 not a header, Rar!\x1a\x07\x01\x00 nor this"...)
	stub = append(stub, bytes.Repeat([]byte("more code "), 100)...)
	if d := Detect(bytes.NewReader(stub), int64(len(stub))); d.Format != FormatNone || !d.SFX {
		t.Errorf("program holding RAR's signature: %+v, want no archive", d)
	}
	for name, rar := range map[string][]byte{"rar5": archivetest.Rar(files), "rar4": rar4Volumes(files, 1)[0]} {
		data := append(append([]byte{}, stub...), rar...)
		if d := Detect(bytes.NewReader(data), int64(len(data))); d.Format != FormatRar || d.Offset != int64(len(stub)) {
			t.Errorf("%s after the stub: %+v, want rar at %d", name, d, len(stub))
		}
		l, err := memList(context.Background(), FormatNone, Limits{}, data)
		if err != nil || l.Format != FormatRar || !l.SFX {
			t.Fatalf("%s after the stub: %+v, %v", name, l, err)
		}
		checkEntries(t, l.Entries, wantEntries(files))
	}
}

// A RAR self-extractor is listed wherever Detect finds its archive: after
// a stub of more than a MiB too.
func TestRarAfterALargeStub(t *testing.T) {
	t.Parallel()
	files := sampleFiles()
	stub := append([]byte("\x7fELF\x02\x01\x01\x00"), bytes.Repeat([]byte("code "), 2<<20/5)...)
	data := append(stub, archivetest.Rar(files)...)
	if d := Detect(bytes.NewReader(data), int64(len(data))); d.Format != FormatRar || d.Offset != int64(len(stub)) {
		t.Fatalf("Detect = %+v, want rar at %d", d, len(stub))
	}
	l, err := memList(context.Background(), FormatNone, Limits{}, data)
	if err != nil || l.Format != FormatRar {
		t.Fatalf("listing = %+v, %v", l, err)
	}
	checkEntries(t, l.Entries, wantEntries(files))
}
