package tgsim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// This file lays a client's downloads out in its files directory as
// TDLib does (FileLoaderUtils.cpp): a download is written to a new file
// of temp/, named by a counter the database directory keeps
// (open_temp_file), and once complete is moved to documents/ under the
// document's cleaned name, or that name with a suffix when the name is
// taken (create_from_temp). stashd's start-up sweep of stale downloads
// (tg/tdlib) relies on this layout.

// The subdirectories of a files directory that downloads of documents use.
const (
	tempSubdir      = "temp"
	documentsSubdir = "documents"
)

// newTempFile creates the file a new download is written to: temp/<n>,
// with n the directory's temporary file number for it, or temp/<n>_<k>
// when another instance sharing the files directory took that name. It
// returns the file open, as TDLib writes through the descriptor it
// created the file with.
func (c *Client) newTempFile(n int) (*os.File, error) {
	dir := filepath.Join(c.filesDir, tempSubdir)
	base := strconv.Itoa(n)
	f, err := createFree(dir, maxTempTries, func(k int) string {
		if k == 0 {
			return base
		}
		return base + "_" + strconv.Itoa(k)
	})
	if err != nil {
		return nil, fmt.Errorf("create download file: %w", err)
	}
	return f, nil
}

// maxTempTries bounds the names newTempFile tries for one number.
const maxTempTries = 100

// maxNameTries bounds the names placeDownload tries, as TDLib's
// for_suggested_file_name: the name, ten numbered ones, ten suffixed.
const maxNameTries = 21

// placeDownload moves the complete download part into documents/ under
// the document's cleaned name: "name.ext", else "name_(0).ext" to
// "name_(9).ext", else "name_(k).ext" for further k, when the earlier ones
// are taken; a document whose name cleans to nothing gets "file_<n>",
// from 0. It returns the new path.
func (c *Client) placeDownload(part, name string) (string, error) {
	dir := filepath.Join(c.filesDir, documentsSubdir)
	stem, ext := splitName(cleanFilename(name))
	if stem == "" {
		c.w.mu.Lock()
		stem = "file_" + strconv.Itoa(c.db.permFiles)
		c.db.permFiles++
		c.w.mu.Unlock()
	}
	f, err := createFree(dir, maxNameTries, func(i int) string {
		if i == 0 {
			return stem + ext
		}
		return fmt.Sprintf("%s_(%d)%s", stem, i-1, ext)
	})
	if errors.Is(err, errNamesTaken) {
		// TDLib's error when every name it tries is taken.
		return "", errors.New("Can't find suitable file name")
	}
	if err != nil {
		return "", fmt.Errorf("create document file: %w", err)
	}
	path := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("create document file: %w", err)
	}
	if err := os.Rename(part, path); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("move download into place: %w", err)
	}
	return path, nil
}

// errNamesTaken is createFree's error when every name it tried is taken.
var errNamesTaken = errors.New("every name tried is taken")

// createFree creates, empty and private, the first of name(0) to
// name(tries-1) in dir that is not taken, and returns it open. It makes
// dir, private, when it is missing (the first download of a files
// directory), so that later ones cost no check of it.
func createFree(dir string, tries int, name func(int) string) (*os.File, error) {
	for i := range tries {
		path := filepath.Join(dir, name(i))
		f, err := createExclusive(path)
		if errors.Is(err, fs.ErrNotExist) {
			// Private to the daemon's user, as TDLib keeps its files
			// under the data directory.
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, err
			}
			f, err = createExclusive(path)
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("%s: %s and %d more: %w", dir, name(0), tries-1, errNamesTaken)
}

// createExclusive creates path, empty and private, and opens it for
// reading and writing; it fails with fs.ErrExist when path is taken. It
// costs the one open(2) TDLib's does, and a fcntl: os.OpenFile would also
// make the descriptor non-blocking, offer it to Go's poller (which
// refuses a regular file) and make it blocking again, five system calls
// where os.NewFile makes one. They were a fifth of the simulator's share
// of a download in a profile of the bench.
func createExclusive(path string) (*os.File, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
		if err == syscall.EINTR {
			continue // a signal (Go's preemption) came first, as os.OpenFile retries
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return os.NewFile(uintptr(fd), path), nil
	}
}

// splitName splits a cleaned file name into its stem and its extension
// with the dot ("" when it has none), as TDLib's PathView.
func splitName(name string) (stem, ext string) {
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		return name[:i], name[i:]
	}
	return name, ""
}
