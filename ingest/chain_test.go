package ingest

import (
	"fmt"
	"strings"
	"testing"

	"stashd/archive"
	"stashd/store"
	"stashd/tg"
)

func docs(names ...string) []tg.Message {
	out := make([]tg.Message, len(names))
	for i, n := range names {
		out[i] = tg.Message{Document: &tg.Document{FileName: n, File: tg.File{Size: 10}}}
	}
	return out
}

// An old-style set whose x.rar says another volume follows x.r00, and a
// zip byte split cut short, are incomplete sets naming the missing part;
// a single archive's damage is not.
func TestVolumeMissingNamesThePart(t *testing.T) {
	t.Parallel()
	volErr := &archive.ListError{Format: archive.FormatRar, Reason: "archive continues", Err: archive.ErrVolumeMissing}
	cutErr := &archive.ListError{Format: archive.FormatZip, Reason: "end record not found", Err: archive.ErrCutShort}
	cases := []struct {
		parts []tg.Message
		err   error
		want  string
	}{
		{docs("old.rar", "old.r00"), volErr, "old.r01 missing"},
		{docs("x.part1.rar", "x.part2.rar"), volErr, "x.part3.rar missing"},
		{docs("z.zip.001", "z.zip.002"), cutErr, "z.zip.003 missing"},
		{docs("one.zip"), cutErr, ""},
		{docs("old.rar", "old.r00"), nil, ""},
	}
	for _, c := range cases {
		got := volumeMissing(c.parts, c.err)
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s: %v, want none", c.parts[0].Document.FileName, got)
		case c.want != "" && (got == nil || !strings.HasPrefix(got.Missing, c.want)):
			t.Errorf("%s: %v, want %q", c.parts[0].Document.FileName, got, c.want)
		}
	}
}

// A gap in a set's names is named as the parts would be posted.
func TestOrderSetNamesGaps(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ names, want string }{
		{"oldmid.rar oldmid.r01", "oldmid.r00 missing"},
		{"gap.part1.rar gap.part3.rar", "gap.part2.rar missing"},
		{"s.7z.001 s.7z.004", "s.7z.002, s.7z.003 missing"},
	} {
		var parts []store.SourceMessage
		for i, n := range strings.Fields(c.names) {
			parts = append(parts, store.SourceMessage{Key: tg.MessageKey{Chat: -1, Message: tg.MessageIDFromServer(int64(i + 1))}, FileName: n, FileSize: int64(100 + i), UniqueID: fmt.Sprint(i)})
		}
		if _, _, _, missing := orderSet("set:x", parts); missing != c.want {
			t.Errorf("%s: missing %q, want %q", c.names, missing, c.want)
		}
	}
}

// A document of no bytes is no archive, whatever its name.
func TestEmptyDocumentIsNoArchive(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"empty.zip", "empty.rar", "empty.part1.rar", "empty.7z.001"} {
		m := tg.Message{Document: &tg.Document{FileName: n}}
		if c := classify(m); c.archive {
			t.Errorf("%s of 0 bytes classified as an archive", n)
		}
	}
}

// A document whose name says nothing (no extension, .exe, .bin) is taken
// in to have its bytes looked at; one named as a known other type is not.
func TestSniffedNames(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"archive-without-extension": true, "setup.EXE": true, "payload.bin": true,
		"scan_0001.pdf": false, "IMG_0001.jpg": false, "notes.txt": false,
	} {
		m := tg.Message{Document: &tg.Document{FileName: name, File: tg.File{Size: 100}}}
		if got := sniffed(m); got != want {
			t.Errorf("sniffed(%q) = %v, want %v", name, got, want)
		}
		if got := classify(m).archive; got != want {
			t.Errorf("classify(%q).archive = %v, want %v", name, got, want)
		}
	}
	if sniffed(tg.Message{Document: &tg.Document{FileName: "empty.bin"}}) {
		t.Error("a document of no bytes sniffed")
	}
}
