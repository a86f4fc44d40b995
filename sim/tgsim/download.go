package tgsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"stashd/tg"
)

// TDLib downloads a file of known size in parts of 64 KiB, doubled while
// the file would take more than 4,000 parts, up to 512 KiB
// (PartsManager::init).
const (
	tdlibPartSize    = 64 << 10
	tdlibMaxPartSize = 512 << 10
	tdlibMaxParts    = 4000
)

// partSize is the size of the parts a download of size bytes writes:
// Config.DownloadPartSize when set, else TDLib's.
func (w *World) partSize(size int) int {
	if w.cfg.DownloadPartSize > 0 {
		return w.cfg.DownloadPartSize
	}
	ps := tdlibPartSize
	for ps < tdlibMaxPartSize && (size+ps-1)/ps > tdlibMaxParts {
		ps *= 2
	}
	return ps
}

// downloadFault is what the world does to one download.
type downloadFault int

const (
	downloadOK downloadFault = iota
	downloadStall
	downloadFail
	// downloadGone: no message the account can read carries the file any
	// more; the download stops before its first byte.
	downloadGone
)

var (
	errDownloadCancelled = errors.New("tgsim: download cancelled")
	errDownloadFailed    = errors.New("tgsim: download failed")
	errDownloadGone      = errors.New("tgsim: no message carries the file any more")
)

// DownloadFaults returns how many downloads the world has stalled or failed
// (Config.StallDownloadRate, Config.FailDownloadRate).
func (w *World) DownloadFaults() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.downloadFaults
}

// DownloadFile implements tg.Client like an asynchronous downloadFile: it
// returns the file's current state at once and writes the bytes in parts
// (World.partSize), reporting each but the last as a FileUpdated, and the
// last with DownloadDone and LocalPath: TDLib reports no progress between
// a download's start and its end when the file is one part
// (FileDownloader::on_progress). As TDLib, it writes them to a file of the instance's
// files directory's temp/ and, once complete, moves that to documents/
// under the document's cleaned name (filesdir.go). A file this
// client has already downloaded (and whose local copy still exists) is
// returned complete with no update; a download already running is not
// started twice. An id this client never saw fails with TDLib's 400 "File
// not found" (FileManager::download_file).
//
// As TDLib, a download that stops short (cancelled, failed, or cut by the
// client's close) leaves its partial file on disk, and the next download
// of the file goes on from it; deleteFile removes it. The database
// directory remembers what its instances left, partial or complete
// (TDLib's file database): an instance started later on it sees those
// files as they were, and goes on from them (recallFile).
//
// With Config.StallDownloadRate a download stops after its first part
// and reports nothing more until cancelled; with Config.FailDownloadRate
// it ends after its first part with a FileUpdated neither active nor
// complete. A part that would complete the file is never written by a
// faulty download: a file of one part stops before its first byte.
func (c *Client) DownloadFile(ctx context.Context, id int32) (tg.File, error) {
	return call(ctx, c, tg.MethodDownloadFile, func() (tg.File, error) {
		w := c.w
		cf := c.files[id]
		if cf == nil {
			return tg.File{}, errBadRequest("File not found")
		}
		if c.fileAccessLost(cf.uid) {
			return tg.File{}, errNoAccess()
		}
		if cf.done {
			if _, err := os.Stat(cf.localPath); err == nil {
				return c.fileView(cf), nil
			}
			// TDLib notices a deleted local copy and downloads again.
			cf.done, cf.localPath, cf.downloaded = false, "", 0
			c.keepFile(cf)
		}
		if cf.active {
			return c.fileView(cf), nil
		}
		if c.filesDir == "" {
			return tg.File{}, errors.New("tgsim: download: no files directory (Config.FilesDir is empty)")
		}
		if cf.partial != "" && !onDisk(cf.partial, cf.downloaded) {
			cf.partial, cf.downloaded = "", 0 // its partial file went: from the start
			c.keepFile(cf)
		}
		fault := downloadOK
		switch {
		case !c.fileReachable(cf.uid):
			// Deleted (or edited away) before it was fetched: TDLib's
			// file reference repair reads the messages again and finds
			// none carrying the file, so the download stops at once.
			c.repairReference(cf.uid)
			fault = downloadGone
		case w.chance(w.cfg.StallDownloadRate):
			fault = downloadStall
		case w.chance(w.cfg.FailDownloadRate):
			fault = downloadFail
		}
		if fault == downloadStall || fault == downloadFail {
			w.downloadFaults++
		}
		part, from, temp := cf.partial, cf.downloaded, 0
		if part == "" {
			// A new download's file is numbered now, made by the download.
			c.db.tempFiles++
			temp, from = c.db.tempFiles, 0
		}
		cf.active = true
		cf.cancel = make(chan struct{})
		c.wg.Add(1)
		go c.download(cf, w.files[cf.uid].data, fault, cf.cancel, part, from, temp)
		return c.fileView(cf), nil
	})
}

// CancelDownloadFile implements tg.Client: a running download stops and
// reports a FileUpdated neither active nor complete, its partial file
// kept; an idle file is left alone. As in TDLib
// (FileManager::cancel_download), an id this client never saw is answered
// ok too.
func (c *Client) CancelDownloadFile(ctx context.Context, id int32) error {
	return call0(ctx, c, tg.MethodCancelDownloadFile, func() error {
		if cf := c.files[id]; cf != nil {
			cf.stop()
		}
		return nil
	})
}

// DeleteFile implements tg.Client: it stops a running download and removes
// the local copy, partial or complete, reporting the file as no longer
// downloaded. As in TDLib (FileManager::delete_file), an id this client
// never saw is answered ok.
func (c *Client) DeleteFile(ctx context.Context, id int32) error {
	return call0(ctx, c, tg.MethodDeleteFile, func() error {
		cf := c.files[id]
		if cf == nil {
			return nil
		}
		if cf.active {
			cf.deleting = true
			cf.stop() // the download removes its partial file and reports
			return nil
		}
		path := cf.localPath
		if !cf.done {
			path = cf.partial
		}
		if path == "" {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return &tg.Error{Code: 500, Message: "delete file: " + err.Error()}
		}
		cf.done, cf.localPath, cf.partial, cf.downloaded = false, "", "", 0
		c.keepFile(cf)
		c.enqueue(tg.FileUpdated{File: c.fileView(cf)})
		return nil
	})
}

// stop ends the running download, if any. w.mu is held.
func (cf *clientFile) stop() {
	if cf.cancel != nil {
		close(cf.cancel)
		cf.cancel = nil
	}
}

// localFile is a download an instance left on disk, as the database
// directory's file database records it.
type localFile struct {
	path string
	size int64 // bytes on disk: the partial prefix, or the whole file
	done bool
}

// keepFile records cf's local state in the directory's file database: its
// complete or partial file, or nothing. w.mu is held.
func (c *Client) keepFile(cf *clientFile) {
	if c.db == nil {
		return
	}
	switch {
	case cf.done:
		c.db.files[cf.uid] = localFile{path: cf.localPath, size: cf.downloaded, done: true}
	case cf.partial != "":
		c.db.files[cf.uid] = localFile{path: cf.partial, size: cf.downloaded}
	default:
		delete(c.db.files, cf.uid)
	}
}

// recallFile gives cf, new to this client, what the directory's file
// database holds of its file, when that is still on disk: TDLib checks a
// local location before it trusts it. w.mu is held.
func (c *Client) recallFile(cf *clientFile) {
	if c.db == nil {
		return
	}
	lf, ok := c.db.files[cf.uid]
	switch {
	case !ok:
	case !onDisk(lf.path, lf.size):
		delete(c.db.files, cf.uid)
	case lf.done:
		cf.done, cf.localPath, cf.downloaded = true, lf.path, lf.size
	default:
		cf.partial, cf.downloaded = lf.path, lf.size
	}
}

// onDisk reports whether path holds at least size bytes.
func onDisk(path string, size int64) bool {
	st, err := os.Stat(path)
	return err == nil && st.Size() >= size
}

// download writes data in parts to the partial file part from its offset
// from (a new file numbered temp when part is ""), spreading SendLatency
// over them, then moves it into documents/. It gives up quietly when the
// client closes.
func (c *Client) download(cf *clientFile, data []byte, fault downloadFault, cancel <-chan struct{}, part string, from int64, temp int) {
	defer c.wg.Done()
	w := c.w
	// TDLib writes into a temporary file and moves it into place when done,
	// so LocalPath never names a partial file.
	var f *os.File
	var err error
	if part == "" {
		if f, err = c.newTempFile(temp); err == nil {
			part = f.Name()
		}
	} else {
		// A download resumed writes on at the end of its partial file.
		f, err = os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			err = fmt.Errorf("create download file: %w", err)
		}
	}
	if err == nil {
		err = c.writeParts(cf, f, data, fault, cancel, from)
	}
	var final string
	if err == nil {
		final, err = c.placeDownload(part, cf.name)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	cf.active = false
	if cf.cancel != nil && cf.cancel == cancel {
		cf.cancel = nil
	}
	if err != nil {
		// TDLib keeps what it downloaded, to go on from it, unless
		// deleteFile stopped the download.
		cf.partial = part
		if cf.deleting || cf.downloaded == 0 {
			os.Remove(part)
			cf.partial, cf.downloaded = "", 0
		}
		cf.deleting = false
		c.keepFile(cf)
		if !errors.Is(err, tg.ErrClosed) {
			// TDLib reports a failed or cancelled download as a file that
			// stopped: neither active nor complete.
			c.enqueue(tg.FileUpdated{File: c.fileView(cf)})
		}
		return
	}
	cf.done, cf.localPath, cf.partial, cf.downloaded = true, final, "", int64(len(data))
	if cf.deleting {
		// deleteFile came as the last bytes did: it removes the file.
		os.Remove(final)
		cf.done, cf.localPath, cf.downloaded, cf.deleting = false, "", 0, false
	}
	c.keepFile(cf)
	c.enqueue(tg.FileUpdated{File: c.fileView(cf)})
}

// writeParts writes data from offset from in parts, reporting progress
// after every part but the last (the caller reports completion), and
// spreads SendLatency over the parts and the move into place. A faulty
// download stops after its first part, or before it when that part would
// complete the file: a stall waits, silent, for a cancel.
func (c *Client) writeParts(cf *clientFile, f *os.File, data []byte, fault downloadFault, cancel <-chan struct{}, from int64) error {
	defer f.Close()
	from = min(from, int64(len(data)))
	if err := f.Truncate(from); err != nil {
		return fmt.Errorf("resume download file: %w", err)
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return fmt.Errorf("resume download file: %w", err)
	}
	if fault == downloadGone {
		return errDownloadGone
	}
	step := c.w.partSize(len(data))
	pause := c.w.cfg.SendLatency / time.Duration((len(data)-int(from)+step-1)/step+1)
	for off := int(from); off < len(data); off += step {
		if err := c.pause(pause, cancel); err != nil {
			return err
		}
		if err := c.awaitConnection(cancel); err != nil {
			return err
		}
		end := min(off+step, len(data))
		if fault != downloadOK && end == len(data) {
			return c.downloadFault(fault, cancel)
		}
		if _, err := f.Write(data[off:end]); err != nil {
			return fmt.Errorf("write download file: %w", err)
		}
		if end < len(data) {
			c.w.mu.Lock()
			cf.downloaded = int64(end)
			c.enqueue(tg.FileUpdated{File: c.fileView(cf)})
			c.w.mu.Unlock()
		}
		if fault != downloadOK {
			return c.downloadFault(fault, cancel)
		}
	}
	if err := c.pause(pause, cancel); err != nil {
		return err
	}
	return f.Close()
}

// downloadFault ends a faulty download: at once when it fails, once
// cancelled or closed when it stalls.
func (c *Client) downloadFault(fault downloadFault, cancel <-chan struct{}) error {
	if fault == downloadFail {
		return errDownloadFailed
	}
	select {
	case <-cancel:
		return errDownloadCancelled
	case <-c.done:
		return tg.ErrClosed
	}
}

// pause waits d, or returns tg.ErrClosed as soon as the client closes, or
// errDownloadCancelled when the download is cancelled.
func (c *Client) pause(d time.Duration, cancel <-chan struct{}) error {
	if d <= 0 {
		select {
		case <-c.done:
			return tg.ErrClosed
		case <-cancel:
			return errDownloadCancelled
		default:
			return nil
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.done:
		return tg.ErrClosed
	case <-cancel:
		return errDownloadCancelled
	}
}

// sanitize makes a file or account name safe as one path element.
func sanitize(name string) string {
	name = strings.Map(func(r rune) rune {
		switch {
		case r == '/' || r == '\\' || r == 0 || r < ' ':
			return '_'
		}
		return r
	}, name)
	if name == "" || name == "." || name == ".." {
		return "_"
	}
	return name
}
