package tdlib

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A start removes the downloads a stopped process left in the files
// directory once they are stale, complete or partial, and keeps the recent
// ones (the restarted instance goes on with them) and everything that is
// not a download of stashd's.
func TestSweepDownloadsRemovesStaleOnes(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	old := now.Add(-2 * time.Hour)
	files := []struct {
		path  string
		size  int
		when  time.Time
		stays bool
	}{
		{"documents/left.zip", 300, old, false},
		{"temp/cut.part", 100, old, false},
		{"documents/recent.zip", 50, now.Add(-time.Minute), true},
		{"temp/recent.part", 50, now, true},
		{"thumbnails/old.jpg", 10, old, true},
		{"old.bin", 10, old, true},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, f.size), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, f.when, f.when); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "documents", "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	n, bytes, err := sweepDownloads(dir, now)
	if err != nil || n != 2 || bytes != 400 {
		t.Fatalf("sweepDownloads = %d files, %d bytes, %v; want 2 files, 400 bytes", n, bytes, err)
	}
	var left []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			left = append(left, filepath.ToSlash(rel))
		}
		return err
	})
	var want []string
	for _, f := range files {
		if f.stays {
			want = append(want, f.path)
		}
	}
	slices.Sort(left)
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "documents", "sub")); err != nil {
		t.Errorf("a directory under documents went: %v", err)
	}
	// A directory without downloads is no error.
	if n, _, err := sweepDownloads(t.TempDir(), now); err != nil || n != 0 {
		t.Errorf("sweepDownloads of an empty directory = %d, %v", n, err)
	}
}
