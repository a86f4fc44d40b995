package tgsim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"stashd/tg"
)

// downloadChunks is how many progress steps a download takes.
const downloadChunks = 4

// DownloadFile implements tg.Client like an asynchronous downloadFile: it
// returns the file's current state at once and writes the bytes to
// FilesDir/<account>/<file id>_<name> in a few chunks, reporting each as a
// FileUpdated and the last with DownloadDone and LocalPath. A file this
// client has already downloaded (and whose local copy still exists) is
// returned complete with no update; a download already running is not
// started twice. An id this client never saw fails with 400.
func (c *Client) DownloadFile(ctx context.Context, id int32) (tg.File, error) {
	return call(ctx, c, tg.MethodDownloadFile, func() (tg.File, error) {
		cf := c.files[id]
		if cf == nil {
			return tg.File{}, errBadRequest("Invalid file identifier")
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
		}
		if cf.active {
			return c.fileView(cf), nil
		}
		if c.w.cfg.FilesDir == "" {
			return tg.File{}, errors.New("tgsim: download: Config.FilesDir is empty")
		}
		cf.active = true
		c.wg.Add(1)
		go c.download(cf, c.w.files[cf.uid].data)
		return c.fileView(cf), nil
	})
}

// download writes data to the file's local path in chunks, spreading
// SendLatency over them. It gives up quietly when the client closes.
func (c *Client) download(cf *clientFile, data []byte) {
	defer c.wg.Done()
	w := c.w
	dir := filepath.Join(w.cfg.FilesDir, sanitize(c.account))
	final := filepath.Join(dir, fmt.Sprintf("%d_%s", cf.id, sanitize(cf.name)))
	// TDLib writes into a temporary file and moves it into place when done,
	// so LocalPath never names a partial file.
	part := final + ".part"
	err := c.writeChunks(cf, dir, part, data)
	if err == nil {
		err = os.Rename(part, final)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	cf.active = false
	if err != nil {
		os.Remove(part)
		if !errors.Is(err, tg.ErrClosed) {
			// TDLib reports a failed download as a file that stopped.
			c.enqueue(tg.FileUpdated{File: c.fileView(cf)})
		}
		return
	}
	cf.done, cf.localPath, cf.downloaded = true, final, int64(len(data))
	c.enqueue(tg.FileUpdated{File: c.fileView(cf)})
}

// writeChunks writes data in downloadChunks steps, reporting progress after
// every step but the last (the caller reports completion).
func (c *Client) writeChunks(cf *clientFile, dir, path string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create download dir: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create download file: %w", err)
	}
	defer f.Close()
	step := max((len(data)+downloadChunks-1)/downloadChunks, 1)
	pause := c.w.cfg.SendLatency / downloadChunks
	for off := 0; off < len(data); off += step {
		if err := c.pause(pause); err != nil {
			return err
		}
		end := min(off+step, len(data))
		if _, err := f.Write(data[off:end]); err != nil {
			return fmt.Errorf("write download file: %w", err)
		}
		if end < len(data) {
			c.w.mu.Lock()
			cf.downloaded = int64(end)
			c.enqueue(tg.FileUpdated{File: c.fileView(cf)})
			c.w.mu.Unlock()
		}
	}
	if err := c.pause(pause); err != nil {
		return err
	}
	return f.Close()
}

// pause waits d, or returns tg.ErrClosed as soon as the client closes.
func (c *Client) pause(d time.Duration) error {
	if d <= 0 {
		select {
		case <-c.done:
			return tg.ErrClosed
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
