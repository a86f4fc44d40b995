package tdlib

import (
	"log/slog"
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
	n, bytes, kept, err := sweepDownloads(dir, now)
	if err != nil || n != 2 || bytes != 400 {
		t.Fatalf("sweepDownloads = %d files, %d bytes, %v; want 2 files, 400 bytes", n, bytes, err)
	}
	var keptPaths []string
	for _, k := range kept {
		rel, _ := filepath.Rel(dir, k.path)
		keptPaths = append(keptPaths, filepath.ToSlash(rel))
	}
	slices.Sort(keptPaths)
	if want := []string{"documents/recent.zip", "temp/recent.part"}; !slices.Equal(keptPaths, want) {
		t.Errorf("kept %v, want %v", keptPaths, want)
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
	if n, _, _, err := sweepDownloads(t.TempDir(), now); err != nil || n != 0 {
		t.Errorf("sweepDownloads of an empty directory = %d, %v", n, err)
	}
}

// What a start kept because it was recent goes later, once nothing has
// touched it: a restarted instance that goes on with a partial download
// writes it (its time changes), one that finished it moves it away, and
// what is left as it was is the leftover of a process killed in its last
// hour. A stop before then removes nothing.
func TestKeptDownloadsGoLaterWhenUntouched(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	write := func(name string, size int) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	left, resumed, moved := write("temp/3", 100), write("temp/4", 100), write("documents/a.zip", 70)
	_, _, kept, err := sweepDownloads(dir, now)
	if err != nil || len(kept) != 3 {
		t.Fatalf("sweepDownloads kept %d, %v; want the 3 recent files", len(kept), err)
	}

	stop := make(chan struct{})
	done := make(chan struct{})
	close(stop)
	sweepKeptLater(kept, time.Hour, stop, slog.New(slog.DiscardHandler), done)
	<-done
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("a stop before the hour removed %s: %v", left, err)
	}

	// The instance goes on with temp/4 and finishes documents/a.zip.
	if err := os.WriteFile(resumed, make([]byte, 150), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(moved); err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	sweepKeptLater(kept, time.Millisecond, make(chan struct{}), slog.New(slog.DiscardHandler), done)
	<-done
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the untouched %s stays (%v); want it removed", left, err)
	}
	if st, err := os.Stat(resumed); err != nil || st.Size() != 150 {
		t.Errorf("the resumed %s: %v, %v; want it kept", resumed, st, err)
	}
}
