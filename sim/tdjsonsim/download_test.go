package tdjsonsim_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"stashd/sim/tgsim"
)

// downloadOn logs acct1 in, posts a document and returns its file id as
// the client sees it.
func downloadOn(t *testing.T, w *world, c *wire) int64 {
	t.Helper()
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	c.ok(1, "openChat", map[string]any{"chat_id": w.channel}, "ok")
	posted := w.Post(w.channel, 0, tgsim.Post{FileName: "f.tar", Data: make([]byte, 4000)})
	res := c.ok(1, "getMessage", map[string]any{"chat_id": w.channel, "message_id": posted.ID}, "message")
	return res.int("content", "document", "document", "id")
}

// stalledDownload starts, on a world whose downloads stall after their
// first part (of 250 bytes), the download of a document by acct1, and
// returns the connection and the file's id.
func stalledDownload(t *testing.T) (*wire, int64) {
	t.Helper()
	w := newWorld(t, tgsim.Config{Seed: 2, StallDownloadRate: 1, DownloadPartSize: 250})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	id := downloadOn(t, w, c)
	c.ok(1, "downloadFile", downloadParams(id), "file")
	return c, id
}

func downloadParams(id int64) map[string]any {
	return map[string]any{"file_id": id, "priority": 1, "offset": 0, "limit": 0, "synchronous": false}
}

// stopped reports whether o is an updateFile of file id that TDLib sends
// for a download that ended without the file.
func stopped(o tdObject, id int64) bool {
	return o.typ() == "updateFile" && o.int("file", "id") == id &&
		o.get("file", "local", "is_downloading_active") == false &&
		o.get("file", "local", "is_downloading_completed") == false
}

// A failed download is written on the wire as TDLib writes it: updateFile
// neither active nor complete.
func TestFailedDownloadOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 2, FailDownloadRate: 1})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	id := downloadOn(t, w, c)
	c.send(1, "downloadFile", downloadParams(id))
	c.until("stopped download", func(o tdObject) bool { return stopped(o, id) })
}

// A stalled download is cancelled with cancelDownloadFile (answered ok,
// then updateFile stopped); deleteFile removes a completed local copy.
func TestCancelAndDeleteOnTheWire(t *testing.T) {
	t.Parallel()
	c, id := stalledDownload(t)
	okThenUpdate(c, "cancelDownloadFile", map[string]any{"file_id": id, "only_if_pending": false}, "cancelled download", id)
	// TDLib answers ok for a file it does not know (FileManager::cancel_download).
	c.ok(1, "cancelDownloadFile", map[string]any{"file_id": 1 << 30, "only_if_pending": false}, "ok")
	c.ok(1, "deleteFile", map[string]any{"file_id": 1 << 30}, "ok")
	if res := c.ok(1, "downloadFile", downloadParams(1<<30), "error"); res.int("code") != 400 || res.str("message") != "File not found" {
		t.Errorf("downloadFile of an unknown file: %v, want 400 File not found", res)
	}

	w2 := newWorld(t, tgsim.Config{Seed: 2})
	_, path2 := startServer(t, w2.World)
	c2 := dialWire(t, path2)
	id2 := downloadOn(t, w2, c2)
	c2.send(1, "downloadFile", downloadParams(id2))
	done, _ := c2.until("completed download", func(o tdObject) bool {
		return o.typ() == "updateFile" && o.get("file", "local", "is_downloading_completed") == true
	})
	local := done.str("file", "local", "path")
	okThenUpdate(c2, "deleteFile", map[string]any{"file_id": id2}, "deleted file", id2)
	if _, err := os.Stat(local); !os.IsNotExist(err) {
		t.Errorf("%s still there after deleteFile: %v", local, err)
	}
}

// okThenUpdate calls typ, which must answer ok, and waits for the
// updateFile saying file id stopped. TDLib may write that update before
// the answer or after it: both orders are accepted.
func okThenUpdate(c *wire, typ string, params map[string]any, what string, id int64) {
	c.t.Helper()
	res, before := c.call(1, typ, params)
	if res.typ() != "ok" {
		c.t.Fatalf("%s: got %v, want ok", typ, res)
	}
	if slices.ContainsFunc(before, func(o tdObject) bool { return stopped(o, id) }) {
		return
	}
	c.until(what, func(o tdObject) bool { return stopped(o, id) })
}

// A download asked for while the account is offline makes no progress on
// the wire (no updateFile of downloaded bytes) until the reconnect, and
// then completes.
func TestDownloadWaitsForTheConnectionOnTheWire(t *testing.T) {
	t.Parallel()
	w := newWorld(t, tgsim.Config{Seed: 2})
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	id := downloadOn(t, w, c)
	w.Disconnect("acct1", 0)
	c.ok(1, "downloadFile", downloadParams(id), "file")
	time.Sleep(300 * time.Millisecond)
	if f := c.ok(1, "downloadFile", downloadParams(id), "file"); f.int("local", "downloaded_size") != 0 || f.get("local", "is_downloading_completed") == true {
		t.Fatalf("after 300 ms offline the file is %v, want no progress", f)
	}
	w.Reconnect("acct1")
	c.until("completed download", func(o tdObject) bool {
		return o.typ() == "updateFile" && o.int("file", "id") == id && o.get("file", "local", "is_downloading_completed") == true
	})
}

// A cancelled download keeps what it fetched, as TDLib's does: the stopped
// updateFile still counts its bytes (downloaded_prefix_size), and the next
// downloadFile goes on from them. deleteFile removes them.
func TestCancelledDownloadKeepsItsBytesOnTheWire(t *testing.T) {
	t.Parallel()
	c, id := stalledDownload(t)
	c.until("the download's first bytes", func(o tdObject) bool {
		return o.typ() == "updateFile" && o.int("file", "id") == id && o.int("file", "local", "downloaded_prefix_size") > 0
	})
	res, before := c.call(1, "cancelDownloadFile", map[string]any{"file_id": id, "only_if_pending": false})
	if res.typ() != "ok" {
		t.Fatalf("cancelDownloadFile: %v, want ok", res)
	}
	end := tdObject(nil)
	if i := slices.IndexFunc(before, func(o tdObject) bool { return stopped(o, id) }); i >= 0 {
		end = before[i]
	} else {
		end, _ = c.until("cancelled download", func(o tdObject) bool { return stopped(o, id) })
	}
	kept := end.int("file", "local", "downloaded_prefix_size")
	if kept <= 0 || kept >= 4000 {
		t.Fatalf("the cancelled download's updateFile counts %d bytes, want the part fetched kept: %v", kept, end)
	}
	again := c.ok(1, "downloadFile", downloadParams(id), "file")
	if got := again.int("local", "downloaded_prefix_size"); got != kept || again.get("local", "is_downloading_active") != true {
		t.Fatalf("downloadFile after the cancel: %v; want it active from %d bytes", again, kept)
	}
	res, before = c.call(1, "deleteFile", map[string]any{"file_id": id})
	if res.typ() != "ok" {
		t.Fatalf("deleteFile: %v, want ok", res)
	}
	gone := func(o tdObject) bool { return stopped(o, id) && o.int("file", "local", "downloaded_prefix_size") == 0 }
	if !slices.ContainsFunc(before, gone) {
		c.until("deleted download", gone)
	}
}
