package tgsim

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"stashd/tg"
)

// startDownload posts a document and starts downloading it on f's client.
func startDownload(t *testing.T, f *fixture) tg.File {
	t.Helper()
	return download(t, f, postDocument(t, f))
}

// postDocument posts a document in f's channel and returns it as f's
// client reads it.
func postDocument(t *testing.T, f *fixture) tg.Message {
	t.Helper()
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	posted := f.w.Post(f.chat, 0, doc("faulty.zip", 1000))
	m, err := f.c.GetMessage(f.ctx, f.chat, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// download starts downloading m's document on f's client.
func download(t *testing.T, f *fixture, m tg.Message) tg.File {
	t.Helper()
	started, err := f.c.DownloadFile(f.ctx, m.Document.File.ID)
	if err != nil || !started.DownloadActive {
		t.Fatalf("DownloadFile = %+v, %v; want a download in progress", started, err)
	}
	return started
}

// partFiles lists what alice's files directory holds in temp/ and
// documents/.
func partFiles(t *testing.T, dir string) []string {
	t.Helper()
	got, err := filepath.Glob(filepath.Join(dir, "alice", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A failing download ends like TDLib's: an updateFile neither active nor
// complete, after some progress. TDLib keeps the partial file, to go on
// from it; deleteFile removes it.
func TestFailDownloadRateEndsWithStoppedFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{FailDownloadRate: 1, DownloadPartSize: 250})
	file := startDownload(t, f)
	end := next[tg.FileUpdated](t, f.c, func(u tg.FileUpdated) bool { return !u.File.DownloadActive }).File
	if end.ID != file.ID || end.DownloadDone || end.LocalPath != "" || end.Downloaded <= 0 {
		t.Errorf("final update = %+v; want stopped after some progress, not complete", end)
	}
	if n := f.w.DownloadFaults(); n != 1 {
		t.Errorf("DownloadFaults = %d, want 1", n)
	}
	if left := partFiles(t, f.files); len(left) != 1 {
		t.Fatalf("files left after a failed download: %v; want its partial file", left)
	}
	if err := f.c.DeleteFile(f.ctx, file.ID); err != nil {
		t.Fatal(err)
	}
	if left := partFiles(t, f.files); len(left) != 0 {
		t.Errorf("files left after deleteFile: %v", left)
	}
	if gone := next[tg.FileUpdated](t, f.c, func(tg.FileUpdated) bool { return true }).File; gone.Downloaded != 0 || gone.DownloadActive {
		t.Errorf("update after deleteFile = %+v; want nothing downloaded", gone)
	}
}

// A download cut short leaves its partial file, as TDLib's does, and the
// next download of the file goes on from it: after a cancel on the same
// instance, and after a restart on the same database directory (TDLib's
// file database), where a complete download is found complete too.
// deleteFile of a running download removes what it wrote.
func TestPartialDownloadIsKeptAndResumed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{SendLatency: 400 * time.Millisecond, DownloadPartSize: 1000})
	data := make([]byte, 4000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	posted := f.w.Post(f.chat, 0, Post{FileName: "big.tar", Data: data})
	m, err := f.c.GetMessage(f.ctx, f.chat, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	id := m.Document.File.ID
	cutAfterFirstChunk := func(c *Client, id int32) tg.File {
		t.Helper()
		if _, err := c.DownloadFile(f.ctx, id); err != nil {
			t.Fatal(err)
		}
		next(t, c, func(u tg.FileUpdated) bool { return u.File.ID == id && u.File.Downloaded > 0 })
		if err := c.CancelDownloadFile(f.ctx, id); err != nil {
			t.Fatal(err)
		}
		return next(t, c, func(u tg.FileUpdated) bool { return u.File.ID == id && !u.File.DownloadActive }).File
	}

	stopped := cutAfterFirstChunk(f.c, id)
	kept := stopped.Downloaded // a chunk or more, as the cancel came
	if kept <= 0 || kept >= 4000 || kept%1000 != 0 || stopped.DownloadDone {
		t.Fatalf("cancelled download = %+v; want the chunks fetched kept", stopped)
	}
	left := partFiles(t, f.files)
	if len(left) != 1 {
		t.Fatalf("files after a cancel: %v; want the partial one", left)
	}
	resumed, err := f.c.DownloadFile(f.ctx, id)
	if err != nil || resumed.Downloaded != kept || !resumed.DownloadActive {
		t.Fatalf("DownloadFile after a cancel = %+v, %v; want it active from %d bytes", resumed, err, kept)
	}
	var progress []int64
	done := next(t, f.c, func(u tg.FileUpdated) bool {
		progress = append(progress, u.File.Downloaded)
		return u.File.ID == id && u.File.DownloadDone
	}).File
	if got, _ := os.ReadFile(done.LocalPath); !bytes.Equal(got, data) {
		t.Fatalf("resumed download holds %d bytes, not the file's", len(got))
	}
	var want []int64
	for n := kept + 1000; n <= 4000; n += 1000 {
		want = append(want, n)
	}
	if !slices.Equal(progress, want) {
		t.Errorf("resumed download reported %v; want %v, going on from %d", progress, want, kept)
	}

	// restart closes old and starts the next instance on the directory,
	// which reads the posted message.
	restart := func(old *Client) (*Client, tg.Message) {
		t.Helper()
		old.Close()
		c := f.w.Client("alice")
		t.Cleanup(func() { c.Close() })
		if err := c.LoadChats(f.ctx); err != nil {
			t.Fatal(err)
		}
		m, err := c.GetMessage(f.ctx, f.chat, posted.ID)
		if err != nil {
			t.Fatal(err)
		}
		return c, m
	}

	// A new instance on the directory finds the complete file.
	again, m2 := restart(f.c)
	if got := m2.Document.File; !got.DownloadDone || got.LocalPath != done.LocalPath {
		t.Fatalf("the next instance sees the downloaded file as %+v; want it complete at %s", got, done.LocalPath)
	}
	id2 := m2.Document.File.ID
	if err := again.DeleteFile(f.ctx, id2); err != nil {
		t.Fatal(err)
	}
	// A partial one cut by the instance's close is gone on from too.
	if _, err := again.DownloadFile(f.ctx, id2); err != nil {
		t.Fatal(err)
	}
	next(t, again, func(u tg.FileUpdated) bool { return u.File.ID == id2 && u.File.Downloaded > 0 })
	third, m3 := restart(again)
	if got := m3.Document.File; got.Downloaded < 1000 || got.DownloadDone || got.DownloadActive {
		t.Fatalf("the next instance sees the file cut by a close as %+v; want its partial bytes", got)
	}
	id3 := m3.Document.File.ID
	if _, err := third.DownloadFile(f.ctx, id3); err != nil {
		t.Fatal(err)
	}
	if err := third.DeleteFile(f.ctx, id3); err != nil {
		t.Fatal(err)
	}
	next(t, third, func(u tg.FileUpdated) bool { return u.File.ID == id3 && !u.File.DownloadActive })
	if left := partFiles(t, f.files); len(left) != 0 {
		t.Errorf("files after deleteFile of a running download: %v; want none", left)
	}
}

// A stalled download reports some progress, then nothing, until it is
// cancelled: then it reports a stopped file.
func TestStallDownloadRateStallsUntilCancelled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{StallDownloadRate: 1, DownloadPartSize: 250})
	file := startDownload(t, f)
	prog := next[tg.FileUpdated](t, f.c, func(tg.FileUpdated) bool { return true }).File
	if !prog.DownloadActive || prog.Downloaded <= 0 || prog.Downloaded >= 1000 {
		t.Fatalf("first update = %+v; want partial progress", prog)
	}
	// Nothing more arrives for the file: the next update is a later post.
	marker := f.w.Post(f.chat, 0, Post{Text: "marker"})
	for _, u := range collectUntil(t, f.c, func(u tg.Update) bool {
		nm, ok := u.(tg.NewMessage)
		return ok && nm.Message.ID == marker.ID
	}) {
		if fu, ok := u.(tg.FileUpdated); ok {
			t.Fatalf("stalled download reported %+v", fu.File)
		}
	}
	again, err := f.c.DownloadFile(f.ctx, file.ID)
	if err != nil || !again.DownloadActive || again.DownloadDone {
		t.Fatalf("DownloadFile on a stalled file = %+v, %v; want it still active", again, err)
	}
	if err := f.c.CancelDownloadFile(f.ctx, file.ID); err != nil {
		t.Fatal(err)
	}
	end := next[tg.FileUpdated](t, f.c, func(u tg.FileUpdated) bool { return !u.File.DownloadActive }).File
	if end.DownloadDone {
		t.Errorf("cancelled download = %+v", end)
	}
	if n := f.w.DownloadFaults(); n != 1 {
		t.Errorf("DownloadFaults = %d, want 1", n)
	}
	if calls := f.w.Calls("alice")[tg.MethodCancelDownloadFile]; calls != 1 {
		t.Errorf("cancelDownloadFile calls = %d, want 1", calls)
	}
}

// deleteFile removes a completed download's local copy and reports the file
// no longer downloaded; a later downloadFile fetches it again.
func TestDeleteFileRemovesLocalCopy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	file := startDownload(t, f)
	done := next[tg.FileUpdated](t, f.c, func(u tg.FileUpdated) bool { return u.File.DownloadDone }).File
	if err := f.c.DeleteFile(f.ctx, file.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(done.LocalPath); !os.IsNotExist(err) {
		t.Errorf("local copy still there after deleteFile: %v", err)
	}
	gone := next[tg.FileUpdated](t, f.c, func(tg.FileUpdated) bool { return true }).File
	if gone.DownloadDone || gone.DownloadActive || gone.LocalPath != "" {
		t.Errorf("update after deleteFile = %+v", gone)
	}
	again, err := f.c.DownloadFile(f.ctx, file.ID)
	if err != nil || again.DownloadDone {
		t.Fatalf("DownloadFile after deleteFile = %+v, %v; want a new download", again, err)
	}
	next[tg.FileUpdated](t, f.c, func(u tg.FileUpdated) bool { return u.File.DownloadDone })
	// TDLib answers ok for a file it does not know (FileManager::delete_file,
	// cancel_download).
	if err := f.c.DeleteFile(f.ctx, 1<<30); err != nil {
		t.Errorf("DeleteFile of an unknown id = %v, want ok", err)
	}
	if err := f.c.CancelDownloadFile(f.ctx, 1<<30); err != nil {
		t.Errorf("CancelDownloadFile of an unknown id = %v, want ok", err)
	}
}

// A file snapshot that says "complete" is not trusted once stashd deletes
// files: Session.Download asks TDLib, which downloads the file again.
func TestSessionDownloadAfterDeleteFetchesAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	s := tg.NewSession(f.c, func(tg.Update) {})
	posted := f.w.Post(f.chat, 0, doc("again.zip", 1000))
	m, err := f.c.GetMessage(f.ctx, f.chat, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(f.ctx, waitTimeout)
	defer cancel()
	done, err := s.Download(ctx, m.Document.File, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteFile(ctx, done.ID); err != nil {
		t.Fatal(err)
	}
	again, err := s.Download(ctx, done, 0) // the stale snapshot: complete, at a path now gone
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(again.LocalPath); err != nil {
		t.Errorf("download after deleteFile returned %+v: %v", again, err)
	}
}

// TDLib downloads nothing while its connection is away: a download started
// or running while the account is offline makes no progress until the
// reconnect, and then completes.
func TestDownloadWaitsForTheConnection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{SendLatency: 20 * time.Millisecond})
	m := postDocument(t, f)
	f.w.Disconnect("alice", 0)
	file := download(t, f, m)
	time.Sleep(300 * time.Millisecond)
	if now, err := f.c.DownloadFile(f.ctx, file.ID); err != nil || now.Downloaded != 0 || now.DownloadDone {
		t.Fatalf("after 300 ms offline the download is %+v (%v), want no progress", now, err)
	}
	f.w.Reconnect("alice")
	done := next[tg.FileUpdated](t, f.c, func(u tg.FileUpdated) bool { return u.File.ID == file.ID && u.File.DownloadDone }).File
	if done.Downloaded != 1000 || done.LocalPath == "" {
		t.Fatalf("after the reconnect the download ended as %+v, want it complete", done)
	}
}

// Downloads land where TDLib puts them (FileLoaderUtils.cpp): a partial
// one in temp/ under the directory's next number, a complete one in
// documents/ under the document's cleaned name, with "_(0)" added when
// that name is taken, and as "file_0" when the name cleans to nothing.
// stashd's start-up sweep of stale downloads looks in those two places.
func TestDownloadsAreLaidOutAsTDLibLaysThemOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	docs := filepath.Join(f.files, "alice", "documents")
	for i, tc := range []struct{ name, want string }{
		{"set.part1.rar", "set.part1.rar"},
		{"set.part1.rar", "set.part1_(0).rar"},
		{"dir/set.part1.rar", "set.part1_(1).rar"},
		{"\xff.zip", "file_0"},
	} {
		posted := f.w.Post(f.chat, 0, doc(tc.name, 1000+i))
		m, err := f.c.GetMessage(f.ctx, f.chat, posted.ID)
		if err != nil {
			t.Fatal(err)
		}
		id := download(t, f, m).ID
		done := next(t, f.c, func(u tg.FileUpdated) bool { return u.File.ID == id && u.File.DownloadDone }).File
		if want := filepath.Join(docs, tc.want); done.LocalPath != want {
			t.Errorf("download of %q landed at %s; want %s", tc.name, done.LocalPath, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(f.files, "alice", "temp", "*")); len(left) != 0 {
		t.Errorf("temp/ holds %v after complete downloads; want it empty", left)
	}

	g := newFixture(t, Config{StallDownloadRate: 1, DownloadPartSize: 250})
	id := startDownload(t, g).ID
	next(t, g.c, func(u tg.FileUpdated) bool { return u.File.ID == id && u.File.Downloaded > 0 })
	if left := partFiles(t, g.files); !slices.Equal(left, []string{filepath.Join(g.files, "alice", "temp", "1")}) {
		t.Errorf("a stalled download's files: %v; want temp/1 alone", left)
	}
}
