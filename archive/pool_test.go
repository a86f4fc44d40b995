package archive

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"stashd/archive/archivetest"
)

// deflatedZip is a zip of one deflated entry; damaged flips a byte of its
// data, which only the entry's CRC-32 tells.
func deflatedZip(t *testing.T, damaged bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, err := zw.CreateHeader(&zip.FileHeader{Name: "doc.txt", Method: zip.Deflate})
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte(strings.Repeat("pooled readers start clean. ", 400)))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if damaged {
		b[zipLocalLen+len("doc.txt")+40] ^= 0x01
	}
	return b
}

// The gzip readers, directory buffers and CRC inflaters kept between
// listings carry nothing from one listing to the next: listings that
// failed halfway (a cut stream, a header that is not gzip's, a CRC
// mismatch) and sound ones, run at once from several goroutines, each
// list as they would alone.
func TestPooledReadersCarryNothingOver(t *testing.T) {
	files := sampleFiles()
	tgz := archivetest.TarGz(files)
	junk := append([]byte{0x1f, 0x8b, 8, 0xff}, bytes.Repeat([]byte{0xee}, 64)...)
	goodZip, badZip := deflatedZip(t, false), deflatedZip(t, true)
	inputs := []struct {
		name   string
		format Format
		data   []byte
		bad    bool
	}{
		{"tar.gz", FormatTarGz, tgz, false},
		{"tar.gz cut", FormatTarGz, tgz[:len(tgz)/2], true},
		{"gzip header broken", FormatTarGz, junk, true},
		{"zip", FormatZip, goodZip, false},
		{"zip with a bad CRC", FormatZip, badZip, true},
		{"zip of sample files", FormatZip, archivetest.Zip(files), false},
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 4 {
		wg.Go(func() {
			for i := range 60 {
				in := inputs[(g+i)%len(inputs)]
				l, err := memList(context.Background(), in.format, Limits{}, in.data)
				switch {
				case in.bad && !errors.Is(err, ErrMalformed):
					errs <- fmt.Errorf("%s: error %v, want ErrMalformed", in.name, err)
				case !in.bad && err != nil:
					errs <- fmt.Errorf("%s: %v", in.name, err)
				case !in.bad && in.name == "tar.gz" && len(l.Entries) != len(wantEntries(files)):
					errs <- fmt.Errorf("%s: %d entries, want %d", in.name, len(l.Entries), len(wantEntries(files)))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A tar.gz listed after another reuses its inflater: it allocates less
// than the inflater's 32 KiB window (a fresh gzip reader allocates about
// 45 KiB). The least of three listings is taken, so that a collection
// that emptied the pool meanwhile does not decide.
func TestListTarGzReusesItsInflater(t *testing.T) {
	tgz := archivetest.TarGz(sampleFiles())
	list := func() {
		if _, err := memList(context.Background(), FormatTarGz, Limits{}, tgz); err != nil {
			t.Fatal(err)
		}
	}
	list()
	// The race detector makes sync.Pool drop a quarter of what is put
	// back, so the least of many listings is the one that found it.
	least := uint64(1 << 62)
	for range 20 {
		least = min(least, bytesAllocated(list))
	}
	if least >= 32<<10 {
		t.Errorf("a tar.gz listing after another allocated %d bytes; want < %d", least, 32<<10)
	}
}
