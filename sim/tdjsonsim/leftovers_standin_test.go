//go:build libtdjson

package tdjsonsim_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
	"stashd/tg/tdlib"
)

// A process stopped between a download and its deleteFile leaves the file
// in the account's TDLib files directory: complete in documents/, cut
// short in temp/ (TDLib keeps it to go on from it). The adapter's next
// start removes those last written more than an hour before and keeps
// the recent ones; TDLib, finding a file gone, downloads it again.
func TestStartRemovesStaleDownloadsThroughStandIn(t *testing.T) {
	world := tgsim.NewWorld(tgsim.Config{Seed: 6, FilesDir: t.TempDir(), SendLatency: 2 * time.Second, DownloadPartSize: 1000})
	world.AddAccount("acct1", false)
	channel := world.AddChat(tg.KindChannel, "source", "acct1")
	dir, _ := serveWorld(t, world)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cfg := standinConfig(dir, "acct1")

	c, err := tdlib.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.OpenChat(ctx, channel); err != nil {
		t.Fatal(err)
	}
	var files []int32
	var posts []tg.MessageID
	for _, name := range []string{"whole.zip", "cut.zip", "recent.zip"} {
		posted := world.Post(channel, 0, tgsim.Post{FileName: name, Data: make([]byte, 4000)})
		m, err := c.GetMessage(ctx, channel, posted.ID)
		if err != nil {
			t.Fatal(err)
		}
		files, posts = append(files, m.Document.File.ID), append(posts, posted.ID)
	}
	// whole.zip completes; cut.zip and recent.zip stop after their first
	// bytes, as when the process is killed.
	download := func(ids []int32, done func(tg.File) bool) {
		t.Helper()
		for _, id := range ids {
			if _, err := c.DownloadFile(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		for waiting := slices.Clone(ids); len(waiting) > 0; {
			select {
			case u := <-c.Updates():
				if f, ok := u.(tg.FileUpdated); ok && done(f.File) {
					waiting = slices.DeleteFunc(waiting, func(id int32) bool { return id == f.File.ID })
				}
			case <-ctx.Done():
				t.Fatalf("downloads of %v never got there", waiting)
			}
		}
	}
	download(files[:1], func(f tg.File) bool { return f.DownloadDone })
	download(files[1:], func(f tg.File) bool { return f.Downloaded > 0 && !f.DownloadDone })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	filesDir := cfg.FilesDir()
	// TDLib's layout: the complete file under its name, the partial ones
	// numbered in the order their downloads began.
	whole, cut, recent := filepath.Join("documents", "whole.zip"), filepath.Join("temp", "2"), filepath.Join("temp", "3")
	if left := listFiles(t, filesDir); !slices.Equal(left, []string{whole, cut, recent}) {
		t.Fatalf("files a stopped instance left: %v; want %s, %s and %s", left, whole, cut, recent)
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{whole, cut} {
		if err := os.Chtimes(filepath.Join(filesDir, p), old, old); err != nil {
			t.Fatal(err)
		}
	}

	c2, err := tdlib.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c2.Close() }()
	if got := listFiles(t, filesDir); !slices.Equal(got, []string{recent}) {
		t.Fatalf("files after the next start: %v; want only the recent %s", got, recent)
	}
	// The complete file is gone: TDLib downloads it again.
	if err := c2.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c2.OpenChat(ctx, channel); err != nil {
		t.Fatal(err)
	}
	m, err := c2.GetMessage(ctx, channel, posts[0])
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Document.File; f.DownloadDone || f.Downloaded != 0 {
		t.Errorf("the removed download reads as %+v; want it not downloaded", f)
	}
}

// listFiles returns the regular files under dir, relative to it, sorted.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
