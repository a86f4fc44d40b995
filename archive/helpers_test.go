package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"stashd/archive/archivetest"
)

// sampleFiles is the archive content most tests list: directories, an empty
// file, a non-ASCII name, a file big enough to span volumes.
// testdata/sample.tar.bz2 holds archivetest.Tar(sampleFiles()).
func sampleFiles() []archivetest.File {
	return []archivetest.File{
		{Name: "docs", Dir: true},
		{Name: "docs/readme.txt", Data: []byte("hello\n")},
		{Name: "docs/empty.txt"},
		{Name: "данные/файл.bin", Data: bytes.Repeat([]byte("0123456789abcdef"), 4096)},
		{Name: "z.dat", Data: []byte{1, 2, 3}},
	}
}

// wantEntries is what List should report for files.
func wantEntries(files []archivetest.File) []Entry {
	out := make([]Entry, len(files))
	for i, f := range files {
		out[i] = Entry{Path: strings.TrimSuffix(f.Name, "/"), Size: int64(len(f.Data)), Dir: f.Dir}
		if f.Dir {
			out[i].Size = 0
		}
	}
	return out
}

func checkEntries(t *testing.T, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries %+v, want %d", len(got), got, len(want))
	}
	// Only the fields every test states; the name flags have their own tests.
	base := func(e Entry) Entry { return Entry{Path: e.Path, Size: e.Size, Dir: e.Dir, Unsafe: e.Unsafe} }
	for i := range want {
		if base(got[i]) != base(want[i]) {
			t.Errorf("entry %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// memList lists in-memory volumes.
func memList(ctx context.Context, format Format, lim Limits, vols ...[]byte) (Listing, error) {
	p := newPartSet()
	for _, v := range vols {
		p.add(bytes.NewReader(v), int64(len(v)))
	}
	return listParts(ctx, format, p, lim)
}

// writeVolumes writes volumes to files named blob-N in a temp directory (not
// their archive names: List must not depend on them) and returns the paths.
func writeVolumes(t *testing.T, vols ...[]byte) []string {
	t.Helper()
	dir := t.TempDir()
	paths := make([]string, len(vols))
	for i, v := range vols {
		paths[i] = filepath.Join(dir, fmt.Sprintf("blob-%d", i+1))
		if err := os.WriteFile(paths[i], v, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// wantListError checks that err is a *ListError of format whose text
// contains substr and whose cause is cause.
func wantListError(t *testing.T, err error, format Format, substr string, cause error) {
	t.Helper()
	var le *ListError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T) is not a *ListError", err, err)
	}
	if le.Format != format || !strings.HasPrefix(err.Error(), string(format)+": ") || !strings.Contains(err.Error(), substr) {
		t.Errorf("error %q, want format %s and %q", err, format, substr)
	}
	if cause != nil && !errors.Is(err, cause) {
		t.Errorf("error %q does not wrap %v", err, cause)
	}
	if strings.Contains(err.Error(), "internal error") {
		t.Errorf("a walker panicked: %v", err)
	}
}

// cancelAfter is a context whose Err turns to Canceled after n calls: it
// cancels a walk part-way through, deterministically.
type cancelAfter struct {
	context.Context
	left atomic.Int64
	done chan struct{}
}

func newCancelAfter(n int64) *cancelAfter {
	c := &cancelAfter{Context: context.Background(), done: make(chan struct{})}
	c.left.Store(n)
	return c
}

func (c *cancelAfter) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func (c *cancelAfter) Done() <-chan struct{}       { return c.done }
func (c *cancelAfter) Deadline() (time.Time, bool) { return time.Time{}, false }

// bytesAllocated returns the bytes the heap handed out while fn ran. Call
// it only from a test that is not parallel.
func bytesAllocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
