package tgsim

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"stashd/tg"
)

// A download goes in TDLib's parts: 64 KiB, doubled while the file would
// take more than 4,000 parts, up to 512 KiB (PartsManager::init).
func TestPartSizeIsTDLibs(t *testing.T) {
	w := NewWorld(Config{})
	for _, tc := range []struct{ size, want int }{
		{1, 64 << 10},
		{1000, 64 << 10},
		{4000 * 64 << 10, 64 << 10},
		{4000*64<<10 + 1, 128 << 10},
		{300 << 20, 128 << 10},
		{2000 << 20, 512 << 10},
		{4000 << 20, 512 << 10},
	} {
		if got := w.partSize(tc.size); got != tc.want {
			t.Errorf("partSize(%d) = %d; want %d", tc.size, got, tc.want)
		}
	}
	if got := NewWorld(Config{DownloadPartSize: 250}).partSize(1000); got != 250 {
		t.Errorf("partSize with DownloadPartSize 250 = %d; want 250", got)
	}
}

// downloadUpdates downloads a new document of size bytes on f's client
// and returns the Downloaded of each FileUpdated of it up to the one that
// completes it.
func downloadUpdates(t *testing.T, f *fixture, size int) []int64 {
	t.Helper()
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	posted := f.w.Post(f.chat, 0, doc("parts.zip", size))
	m, err := f.c.GetMessage(f.ctx, f.chat, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	id := download(t, f, m).ID
	var got []int64
	next(t, f.c, func(u tg.FileUpdated) bool {
		if u.File.ID != id {
			return false
		}
		got = append(got, u.File.Downloaded)
		return u.File.DownloadDone
	})
	return got
}

// As TDLib (FileDownloader::on_progress), a download reports its progress
// after each part but the last, whose update is the completed file: a
// file of one part reports nothing between its start and its end.
func TestDownloadReportsProgressAfterEachPart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	if got := downloadUpdates(t, f, 1000); !slices.Equal(got, []int64{1000}) {
		t.Errorf("a file of 1000 bytes reported %v; want only its completion", got)
	}
	size := 3*64<<10 + 100
	want := []int64{64 << 10, 128 << 10, 192 << 10, int64(size)}
	if got := downloadUpdates(t, f, size); !slices.Equal(got, want) {
		t.Errorf("a file of %d bytes reported %v; want %v", size, got, want)
	}
}

// A faulty download never writes the part that would complete its file:
// a file of one part stalls, or fails, before its first byte, and nothing
// is left of it.
func TestFaultyOnePartDownloadStopsBeforeItsFirstByte(t *testing.T) {
	t.Parallel()
	stall := newFixture(t, Config{StallDownloadRate: 1})
	file := startDownload(t, stall)
	fileQuiet(t, stall.c, file.ID, 300*time.Millisecond)
	// As TDLib's, the download's file is made as it starts: empty here.
	temp := filepath.Join(stall.files, "alice", "temp", "1")
	if st, err := os.Stat(temp); err != nil || st.Size() != 0 {
		t.Errorf("a stalled one-part download's file %s: %v; want it empty", temp, statSize(st, err))
	}
	if err := stall.c.CancelDownloadFile(stall.ctx, file.ID); err != nil {
		t.Fatal(err)
	}
	stopped := next(t, stall.c, func(u tg.FileUpdated) bool { return u.File.ID == file.ID }).File
	if stopped.Downloaded != 0 || stopped.DownloadActive || stopped.DownloadDone {
		t.Errorf("a cancelled stalled one-part download = %+v; want stopped with nothing downloaded", stopped)
	}
	if left := partFiles(t, stall.files); len(left) != 0 {
		t.Errorf("files after the cancel: %v; want none", left)
	}

	fail := newFixture(t, Config{FailDownloadRate: 1})
	file = startDownload(t, fail)
	ended := next(t, fail.c, func(u tg.FileUpdated) bool { return u.File.ID == file.ID }).File
	if ended.Downloaded != 0 || ended.DownloadActive || ended.DownloadDone {
		t.Errorf("a failed one-part download = %+v; want stopped with nothing downloaded", ended)
	}
	if left := partFiles(t, fail.files); len(left) != 0 {
		t.Errorf("files after the failure: %v; want none", left)
	}
}

// fileQuiet fails the test if c reports a FileUpdated of file id
// within d.
func fileQuiet(t *testing.T, c *Client, id int32, d time.Duration) {
	t.Helper()
	end := time.After(d)
	for {
		select {
		case u := <-c.Updates():
			if fu, ok := u.(tg.FileUpdated); ok && fu.File.ID == id {
				t.Fatalf("a stalled one-part download reported %+v before its cancel", fu.File)
			}
		case <-end:
			return
		}
	}
}

// statSize describes a Stat's result: its size, or its error.
func statSize(st os.FileInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d bytes", st.Size())
}
