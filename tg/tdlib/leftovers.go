package tdlib

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// staleDownload is how long a download left in the account's files
// directory stays untouched before a start removes it (sweepDownloads).
const staleDownload = time.Hour

// downloadDirs are the directories under TDLib's files directory that
// stashd's downloads land in: complete documents, and partial downloads
// of every type (TDLib's get_files_dir and get_files_temp_dir).
var downloadDirs = []string{"documents", "temp"}

// keptDownload is a recent download a start found and kept, as it was
// then.
type keptDownload struct {
	path    string
	modTime time.Time
	size    int64
}

// sweepDownloads removes from filesDir the downloads, complete or partial,
// last written before now less staleDownload. stashd deletes what it
// downloads when each attempt ends (deleteFile), so a file found there was
// left by a process that stopped in between: a kill after a download
// completed, or one that cut a download short, whose partial file TDLib
// keeps. A recent one is kept, for the restarted instance to go on with,
// as TDLib resumes a partial download, and returned: what nothing goes on
// with is removed later (removeUntouched). An older one would stay for
// good once another instance has handled its message. It runs before
// TDLib opens the directory; TDLib notices a file gone and downloads it
// again when asked. It returns the files and bytes removed.
func sweepDownloads(filesDir string, now time.Time) (files int, bytes int64, kept []keptDownload, err error) {
	var r removal
	for _, sub := range downloadDirs {
		dir := filepath.Join(filesDir, sub)
		entries, rerr := os.ReadDir(dir)
		if errors.Is(rerr, fs.ErrNotExist) {
			continue
		}
		if rerr != nil {
			r.errs = append(r.errs, rerr)
			continue
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			info, ierr := e.Info()
			if ierr != nil {
				continue
			}
			path := filepath.Join(dir, e.Name())
			if !info.ModTime().Before(now.Add(-staleDownload)) {
				kept = append(kept, keptDownload{path: path, modTime: info.ModTime(), size: info.Size()})
				continue
			}
			r.remove(path, info.Size())
		}
	}
	files, bytes, err = r.result()
	return files, bytes, kept, err
}

// removeUntouched removes the downloads a start kept that are still as
// they were then (same modification time and size): the instance did not
// go on with them, and nothing else will. A file gone meanwhile is no
// error. It returns the files and bytes removed.
func removeUntouched(kept []keptDownload) (files int, bytes int64, err error) {
	var r removal
	for _, k := range kept {
		info, serr := os.Stat(k.path)
		if serr != nil || !info.ModTime().Equal(k.modTime) || info.Size() != k.size {
			continue
		}
		r.remove(k.path, k.size)
	}
	return r.result()
}

// removal counts the downloads removed and the failures to remove them.
type removal struct {
	files int
	bytes int64
	errs  []error
}

// remove removes the file at path, of size bytes; one gone already is no
// failure, and not counted.
func (r *removal) remove(path string, size int64) {
	if err := os.Remove(path); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.errs = append(r.errs, err)
		}
		return
	}
	r.files++
	r.bytes += size
}

func (r *removal) result() (files int, bytes int64, err error) {
	if len(r.errs) > 0 {
		err = fmt.Errorf("remove downloads a stopped process left: %w", errors.Join(r.errs...))
	}
	return r.files, r.bytes, err
}

// logRemoved logs what a sweep removed (files, bytes) and its failure;
// attrs say which downloads it took.
func logRemoved(log *slog.Logger, files int, bytes int64, err error, attrs ...any) {
	switch {
	case err != nil:
		log.Warn("remove downloads a stopped process left", "files", files, "bytes", bytes, "err", err)
	case files > 0:
		log.Info("removed downloads a stopped process left", append([]any{"files", files, "bytes", bytes}, attrs...)...)
	}
}

// sweepKeptLater waits after, or until stop closes, then removes what a
// start kept and nothing touched since (removeUntouched): the files a
// process killed in its last hour left, which would otherwise stay until
// the next start. It closes done when it returns.
func sweepKeptLater(kept []keptDownload, after time.Duration, stop <-chan struct{}, log *slog.Logger, done chan<- struct{}) {
	defer close(done)
	t := time.NewTimer(after)
	defer t.Stop()
	select {
	case <-stop:
		return
	case <-t.C:
	}
	n, bytes, err := removeUntouched(kept)
	logRemoved(log, n, bytes, err, "untouched_for", after)
}
