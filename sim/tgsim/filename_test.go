package tgsim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stashd/tg"
)

func TestCleanFilename(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"set.part1.rar", "set.part1.rar"},
		{"a<b>c:d\"e|f?g*h&i`j'k.zip", "a b c d e f g h i j k.zip"},
		{"  ..hidden.tar", "hidden.tar"},
		{"dir/sub\\name.7z", "name.7z"},
		{"trailing. .zip", "trailing.zip"},
		{"ünïcödé.zip", "ünïcödé.zip"},
		{"noext", "noext"},
		{".zip", "zip"},
		{strings.Repeat("é", 100) + ".zip", strings.Repeat("é", 64) + ".zip"},
		{"x." + strings.Repeat("e", 30), "x." + strings.Repeat("e", 20)},
		{"bad\xffutf8.zip", ""},
	} {
		if got := cleanFilename(tc.in); got != tc.want {
			t.Errorf("cleanFilename(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A document whose name is longer than a file system allows (300 bytes)
// downloads all the same: the local file is named as TDLib names it, its
// stem cut to 64 characters.
func TestDownloadOfOverlongName(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	if err := f.c.OpenChat(f.ctx, f.chat); err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("n", 296) + ".zip"
	posted := f.w.Post(f.chat, 0, Post{FileName: name, Data: []byte("payload")})
	m, err := f.c.GetMessage(f.ctx, f.chat, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Document.FileName != name {
		t.Fatalf("document name %q, want the 300-byte name kept", m.Document.FileName)
	}
	if _, err := f.c.DownloadFile(f.ctx, m.Document.File.ID); err != nil {
		t.Fatal(err)
	}
	end := next[tg.FileUpdated](t, f.c, func(u tg.FileUpdated) bool { return !u.File.DownloadActive }).File
	if !end.DownloadDone {
		t.Fatalf("download of a 300-byte name ended %+v; want it complete", end)
	}
	base := filepath.Base(end.LocalPath)
	if want := strings.Repeat("n", 64) + ".zip"; base != want {
		t.Errorf("local name %q, want %s", base, want)
	}
	if data, err := os.ReadFile(end.LocalPath); err != nil || string(data) != "payload" {
		t.Errorf("local file = %q, %v", data, err)
	}
}
