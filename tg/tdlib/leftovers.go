package tdlib

import (
	"errors"
	"fmt"
	"io/fs"
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

// sweepDownloads removes from filesDir the downloads, complete or partial,
// last written before now less staleDownload. stashd deletes what it
// downloads when each attempt ends (deleteFile), so a file found there was
// left by a process that stopped in between: a kill after a download
// completed, or one that cut a download short, whose partial file TDLib
// keeps. A recent one is kept: the restarted instance goes on with it, as
// TDLib resumes a partial download. An older one would stay for good once
// another instance has handled its message. It runs before TDLib opens
// the directory; TDLib notices a file gone and downloads it again when
// asked. It returns the files and bytes removed.
func sweepDownloads(filesDir string, now time.Time) (files int, bytes int64, err error) {
	var errs []error
	for _, sub := range downloadDirs {
		dir := filepath.Join(filesDir, sub)
		entries, rerr := os.ReadDir(dir)
		if errors.Is(rerr, fs.ErrNotExist) {
			continue
		}
		if rerr != nil {
			errs = append(errs, rerr)
			continue
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			info, ierr := e.Info()
			if ierr != nil || !info.ModTime().Before(now.Add(-staleDownload)) {
				continue
			}
			if rerr := os.Remove(filepath.Join(dir, e.Name())); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				errs = append(errs, rerr)
				continue
			}
			files++
			bytes += info.Size()
		}
	}
	if len(errs) > 0 {
		return files, bytes, fmt.Errorf("remove downloads a stopped process left: %w", errors.Join(errs...))
	}
	return files, bytes, nil
}
