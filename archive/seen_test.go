package archive

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"stashd/archive/archivetest"

	"go.uber.org/goleak"
)

// seenFiles are incompressible files larger together than the ring
// (seenBuffers × seenChunk), so that its buffers are reused.
func seenFiles() []archivetest.File {
	rng := rand.NewChaCha8([32]byte{'s', 'e', 'e', 'n'})
	var files []archivetest.File
	for _, name := range []string{"a.bin", "dir/b.bin", "dir/c.bin"} {
		b := make([]byte, 3<<19)
		_, _ = rng.Read(b)
		files = append(files, archivetest.File{Name: name, Data: b})
	}
	return append(files, archivetest.File{Name: "d.txt", Data: []byte("d")})
}

// ListSeeing shows a compressed tar's whole stream, in order, split into
// parts or not, and nothing of a format listed from its metadata; it
// leaves no goroutine behind.
func TestListSeeingShowsTheStream(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	files := seenFiles()
	dir := t.TempDir()
	small := sampleFiles() // the xz encoder makes a few MB/s of random data
	for _, c := range []struct {
		format  Format
		data    []byte
		entries int
		parts   int
		whole   bool
	}{
		{FormatTarGz, archivetest.TarGz(files), len(files), 1, true},
		{FormatTarXz, archivetest.TarXz(small), len(small), 1, true},
		{FormatTarZst, archivetest.TarZst(files), len(files), 1, true},
		{FormatTarZst, archivetest.TarZst(files), len(files), 3, true},
		{FormatTarLz4, archivetest.TarLz4(files), len(files), 2, true},
		{FormatZip, archivetest.Zip(files), len(files), 1, false},
		{FormatTar, archivetest.Tar(files), len(files), 1, false},
	} {
		var paths []string
		for i, b := range archivetest.Split(c.data, c.parts) {
			p := filepath.Join(dir, "x."+string(c.format)+"."+string(rune('1'+i)))
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		var seen bytes.Buffer
		l, n, err := ListSeeing(context.Background(), c.format, paths, Limits{}, func(p []byte) { seen.Write(p) })
		if err != nil || len(l.Entries) != c.entries {
			t.Fatalf("%s in %d parts: %d entries, %v", c.format, c.parts, len(l.Entries), err)
		}
		if n != int64(seen.Len()) {
			t.Errorf("%s: reported %d bytes seen, was shown %d", c.format, n, seen.Len())
		}
		if c.whole && !bytes.Equal(seen.Bytes(), c.data) {
			t.Errorf("%s in %d parts: shown %d bytes, not the file's %d", c.format, c.parts, seen.Len(), len(c.data))
		}
		if !c.whole && n != 0 {
			t.Errorf("%s: shown %d bytes of a format listed from its metadata", c.format, n)
		}
	}
}

// A cut or damaged compressed tar is reported as malformed, what was
// shown is a prefix of its bytes (the whole of them when the damage is
// found at the end), and the goroutine that showed them has ended.
func TestListSeeingBrokenStreams(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	files := seenFiles()
	flip := func(b []byte, at int) []byte {
		b = bytes.Clone(b)
		b[at] ^= 0x55
		return b
	}
	zst, gz, xz := archivetest.TarZst(files), archivetest.TarGz(files), archivetest.TarXz(sampleFiles())
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		format Format
		data   []byte
		whole  bool // the damage is found at the end: every byte was shown
	}{
		{"zst cut in its middle", FormatTarZst, zst[:len(zst)/2], true},
		{"zst without its checksum", FormatTarZst, zst[:len(zst)-2], true},
		{"zst with a byte of data changed", FormatTarZst, flip(zst, len(zst)/2), false},
		{"zst with its frame header changed", FormatTarZst, flip(zst, 4), false},
		{"gz cut in its middle", FormatTarGz, gz[:len(gz)/2], true},
		{"gz with a byte of data changed", FormatTarGz, flip(gz, len(gz)/2), false},
		{"xz cut in its middle", FormatTarXz, xz[:len(xz)/2], true},
	} {
		path := filepath.Join(dir, "broken."+string(c.format))
		if err := os.WriteFile(path, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		var seen bytes.Buffer
		_, n, err := ListSeeing(context.Background(), c.format, []string{path}, Limits{}, func(p []byte) { seen.Write(p) })
		var le *ListError
		if !errors.As(err, &le) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: error %v, want a malformed listing", c.name, err)
		}
		if n == 0 || n != int64(seen.Len()) || !bytes.Equal(seen.Bytes(), c.data[:n]) {
			t.Errorf("%s: shown %d bytes (reported %d), not a prefix of the file", c.name, seen.Len(), n)
		}
		if c.whole && n != int64(len(c.data)) {
			t.Errorf("%s: shown %d of its %d bytes, want all of them", c.name, n, len(c.data))
		}
	}
}

// A listing cancelled while its bytes are being shown ends with the
// context's error and leaves no goroutine behind.
func TestListSeeingCancelled(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := filepath.Join(t.TempDir(), "x.tar.zst")
	if err := os.WriteFile(path, archivetest.TarZst(seenFiles()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, err := ListSeeing(ctx, FormatTarZst, []string{path}, Limits{}, func([]byte) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want the context's", err)
	}
}

// signalReader closes reached once its reader has been read past at bytes.
type signalReader struct {
	r       io.Reader
	read    int64
	at      int64
	reached chan struct{}
}

func (s *signalReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.read += int64(n)
	if s.read > s.at && s.reached != nil {
		close(s.reached)
		s.reached = nil
	}
	return n, err
}

// The ring shows its buffers to seen on a goroutine of its own: while seen
// is still busy with the first chunk, the reader goes on reading the
// following ones (hashing and inflating share the time of the slower). It
// shows every byte once, in order, and stop waits for seen's last call.
func TestSeenRingReadsWhileSeenWorks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	data := make([]byte, 3*seenBuffers*seenChunk+123)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(data)
	reached := make(chan struct{})
	src := &signalReader{r: bytes.NewReader(data), at: 2 * seenChunk, reached: reached}
	var seen bytes.Buffer
	calls := 0
	ring := newSeenRing(src, int64(len(data)), &seer{seen: func(p []byte) {
		if calls == 0 {
			select {
			case <-reached:
			case <-time.After(10 * time.Second):
				t.Error("the reader did not read past the first chunks while seen was busy with the first")
			}
		}
		calls++
		seen.Write(p)
	}})
	got, err := io.ReadAll(ring)
	ring.stop()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	if !bytes.Equal(seen.Bytes(), data) || calls != (len(data)+seenChunk-1)/seenChunk {
		t.Errorf("seen %d bytes in %d calls; want the stream's %d in chunks of %d", seen.Len(), calls, len(data), seenChunk)
	}
	if _, err := ring.Read(make([]byte, 1)); err == nil {
		t.Error("a read after stop succeeded")
	}
}

// The ring makes buffers only for bytes the stream has: none to find its
// end, and one of the stream's size when that is less than a chunk.
func TestSeenRingBuffersFitTheStream(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, size := range []int{2 * seenChunk, 1000} {
		data := bytes.Repeat([]byte{7}, size)
		hold := make(chan struct{})
		ring := newSeenRing(bytes.NewReader(data), int64(size), &seer{seen: func([]byte) { <-hold }})
		got, err := io.ReadAll(ring) // seen keeps every buffer it is shown until hold closes
		close(hold)
		ring.stop()
		if err != nil || len(got) != size {
			t.Fatalf("%d bytes: read %d, %v", size, len(got), err)
		}
		want := (size + seenChunk - 1) / seenChunk
		if ring.made != want {
			t.Errorf("%d bytes: %d buffers made, want %d", size, ring.made, want)
		}
		if size < seenChunk && ring.chunk != size {
			t.Errorf("%d bytes: buffers of %d", size, ring.chunk)
		}
	}
}

// The ring reads the stream on a goroutine of its own, ahead of the
// decompressor: the core that inflates makes no system call. Before the
// decompressor's first read the ring has read its buffers full, and no
// further; stopped, it leaves nothing running and has shown seen what it
// read.
func TestSeenRingReadsAheadOfTheDecompressor(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	data := make([]byte, 3*seenBuffers*seenChunk)
	reached := make(chan struct{})
	src := &signalReader{r: bytes.NewReader(data), at: (seenBuffers-1)*seenChunk + 1, reached: reached}
	var seen int64
	s := &seer{seen: func(p []byte) { seen += int64(len(p)) }}
	ring := newSeenRing(src, int64(len(data)), s)
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the ring read nothing ahead before the decompressor's first read")
	}
	time.Sleep(50 * time.Millisecond) // room to read past its buffers, which it must not
	ring.stop()
	if want := int64(seenBuffers * seenChunk); src.read != want || s.n != want || seen != want {
		t.Errorf("read %d, passed to seen %d, seen %d bytes before any read by the decompressor; want its %d buffers' worth", src.read, s.n, seen, want)
	}
}
