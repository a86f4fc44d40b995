package archive

import (
	"archive/zip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/bodgit/sevenzip"
)

// TestList7zCLIArchives lists archives made by 7-Zip itself (compressed
// and encoded headers, solid blocks, volumes, encryption) and compares with
// bodgit/sevenzip and archive/zip. It needs the 7z command (Debian
// p7zip-full) and is skipped without it.
func TestList7zCLIArchives(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("7z"); err != nil {
		t.Skip("7z command not installed (apt-get install p7zip-full)")
	}
	src := t.TempDir()
	tree := map[string]string{
		"top.txt":             "top level",
		"dir/a.txt":           strings.Repeat("a", 5000),
		"dir/sub/b.bin":       strings.Repeat("0123456789", 3000),
		"dir/sub/empty.txt":   "",
		"юникод/файл.txt":     "unicode",
		"dir/sub/deeper/c.go": "package c",
	}
	for name, data := range tree {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(src, "empty-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	make7z := func(name string, args ...string) []string {
		t.Helper()
		cmd := exec.Command("7z", append(append([]string{"a", "-bd", "-y"}, args...), filepath.Join(out, name), ".")...)
		cmd.Dir = src
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("7z %v: %v\n%s", args, err, b)
		}
		parts, _ := filepath.Glob(filepath.Join(out, name) + "*")
		sort.Strings(parts)
		return parts
	}

	tests := []struct {
		name      string
		format    Format
		parts     []string
		encrypted bool
		entries   int // -1: compare with a library instead
	}{
		{"lzma2 solid", Format7z, make7z("solid.7z"), false, -1},
		{"lzma non-solid", Format7z, make7z("lzma.7z", "-m0=lzma", "-ms=off"), false, -1},
		{"copy plain header", Format7z, make7z("copy.7z", "-m0=copy", "-mhc=off"), false, -1},
		{"bcj2 filter", Format7z, make7z("bcj2.7z", "-mf=BCJ2"), false, -1},
		{"bcj chain", Format7z, make7z("bcj.7z", "-m0=BCJ", "-m1=LZMA"), false, -1},
		{"volumes", Format7z, make7z("vol.7z", "-v7k"), false, -1},
		{"encrypted data", Format7z, make7z("enc.7z", "-psecret"), true, -1},
		{"encrypted header", Format7z, make7z("hdr.7z", "-psecret", "-mhe=on"), true, 0},
		{"zip", FormatZip, make7z("z.zip", "-tzip"), false, -1},
		{"zip encrypted", FormatZip, make7z("ze.zip", "-tzip", "-psecret"), true, -1},
		{"tar", FormatTar, make7z("t.tar", "-ttar"), false, 11},
	}
	sigs := map[string][]byte{}
	for _, tt := range tests {
		l, err := List(context.Background(), tt.format, tt.parts, Limits{})
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if l.Encrypted != tt.encrypted {
			t.Errorf("%s: Encrypted %v", tt.name, l.Encrypted)
		}
		if tt.entries >= 0 {
			if len(l.Entries) != tt.entries {
				t.Errorf("%s: %d entries, want %d: %+v", tt.name, len(l.Entries), tt.entries, l.Entries)
			}
			continue
		}
		var want []Entry
		crcs := map[string]uint32{} // the library's CRC-32 of each file
		switch tt.format {
		case Format7z:
			var rc *sevenzip.ReadCloser
			if tt.encrypted {
				rc, err = sevenzip.OpenReaderWithPassword(tt.parts[0], "secret")
			} else {
				rc, err = sevenzip.OpenReader(tt.parts[0])
			}
			if err != nil {
				t.Fatalf("%s: bodgit: %v", tt.name, err)
			}
			for _, f := range rc.File {
				dir := f.FileInfo().IsDir()
				size := int64(f.UncompressedSize)
				want = append(want, Entry{Path: strings.TrimSuffix(f.Name, "/"), Size: size, Dir: dir})
				if !dir {
					crcs[f.Name] = f.CRC32
				}
			}
			rc.Close()
		case FormatZip:
			zr, err := zip.OpenReader(tt.parts[0])
			if err != nil {
				t.Fatalf("%s: archive/zip: %v", tt.name, err)
			}
			for _, f := range zr.File {
				want = append(want, Entry{Path: strings.TrimSuffix(f.Name, "/"), Size: int64(f.UncompressedSize64), Dir: f.Mode().IsDir()})
				if !f.Mode().IsDir() {
					crcs[f.Name] = f.CRC32
				}
			}
			zr.Close()
		}
		if len(want) != 11 { // 6 files and 5 directories
			t.Errorf("%s: the library lists %d entries, want 11", tt.name, len(want))
		}
		checkEntries(t, l.Entries, want)
		// Every file's CRC-32 as the library reads it: repacks are
		// matched on (path, size, CRC) across containers.
		for _, e := range l.Entries {
			if e.Dir {
				continue
			}
			if want, ok := crcs[e.Path]; !ok || !e.HasCRC || e.CRC != want {
				t.Errorf("%s: %s: CRC %08x (recorded %v), the library reads %08x", tt.name, e.Path, e.CRC, e.HasCRC, want)
			}
		}
		if sig, ok := ContentSignature(l.Entries); ok {
			sigs[tt.name] = sig
		}
	}
	// The same tree in every container is the same content.
	for _, name := range []string{"lzma2 solid", "lzma non-solid", "copy plain header", "bcj2 filter", "volumes", "zip"} {
		if sigs[name] == nil || string(sigs[name]) != string(sigs["lzma2 solid"]) {
			t.Errorf("%s: content signature %x, want the solid 7z's %x", name, sigs[name], sigs["lzma2 solid"])
		}
	}
}

// TestListELFSelfExtractor lists a 7z self-extractor for Linux as 7-Zip
// writes it (`7z a -sfx7zCon.sfx`: an ELF program with the archive after
// it), whatever its name: its bytes say 7z, after the stub.
func TestListELFSelfExtractor(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("7z"); err != nil {
		t.Skip("7z command not installed (apt-get install p7zip-full)")
	}
	src, out := t.TempDir(), filepath.Join(t.TempDir(), "setup")
	for name, data := range map[string]string{"a.txt": "first", "dir/b.txt": strings.Repeat("b", 4000)} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("7z", "a", "-bd", "-y", "-sfx7zCon.sfx", out, ".")
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("7z -sfx7zCon.sfx: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "\x7fELF") {
		t.Fatalf("7z wrote no ELF stub: %q", data[:4])
	}
	l, err := List(context.Background(), FormatNone, []string{out}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Format != Format7z || !l.SFX || l.Offset <= 0 {
		t.Fatalf("format %q, sfx %v, offset %d; want 7z after the ELF stub", l.Format, l.SFX, l.Offset)
	}
	checkEntries(t, l.Entries, []Entry{{Path: "dir", Dir: true}, {Path: "a.txt", Size: 5}, {Path: "dir/b.txt", Size: 4000}})
}
