package archive

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"stashd/archive/archivetest"
)

// ListSeeing shows a compressed tar's whole stream, in order, and nothing
// of a format listed from its metadata.
func TestListSeeingShowsTheStream(t *testing.T) {
	files := []archivetest.File{{Name: "a.txt", Data: bytes.Repeat([]byte("x"), 1<<20)}, {Name: "b.txt", Data: []byte("b")}}
	dir := t.TempDir()
	for _, c := range []struct {
		format Format
		data   []byte
		whole  bool
	}{
		{FormatTarGz, archivetest.TarGz(files), true},
		{FormatTarXz, archivetest.TarXz(files), true},
		{FormatZip, archivetest.Zip(files), false},
		{FormatTar, archivetest.Tar(files), false},
	} {
		path := filepath.Join(dir, "x."+string(c.format))
		if err := os.WriteFile(path, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		var seen bytes.Buffer
		l, n, err := ListSeeing(context.Background(), c.format, []string{path}, Limits{}, func(p []byte) { seen.Write(p) })
		if err != nil || len(l.Entries) != 2 {
			t.Fatalf("%s: %d entries, %v", c.format, len(l.Entries), err)
		}
		if n != int64(seen.Len()) {
			t.Errorf("%s: reported %d bytes seen, was shown %d", c.format, n, seen.Len())
		}
		if c.whole && !bytes.Equal(seen.Bytes(), c.data) {
			t.Errorf("%s: shown %d bytes, not the file's %d", c.format, seen.Len(), len(c.data))
		}
		if !c.whole && n != 0 {
			t.Errorf("%s: shown %d bytes of a format listed from its metadata", c.format, n)
		}
	}
}
