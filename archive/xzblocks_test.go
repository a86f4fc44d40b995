package archive

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"

	"stashd/archive/archivetest"
)

// xzStream compresses data as one xz stream.
func xzStream(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	xw, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := xw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := xw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// askXzDict rewrites the LZMA2 dictionary byte of the block header at
// x[at:] to d, keeping the header's CRC valid.
func askXzDict(t *testing.T, x []byte, at int, d byte) {
	t.Helper()
	hlen := (int(x[at]) + 1) * 4
	blk := x[at : at+hlen]
	i := bytes.Index(blk, []byte{0x21, 0x01}) // filter LZMA2, one property byte
	if i < 0 {
		t.Fatal("no LZMA2 filter in the block header")
	}
	blk[i+2] = d
	binary.LittleEndian.PutUint32(blk[hlen-4:], crc32.ChecksumIEEE(blk[:hlen-4]))
}

// A tar.xz made of two xz streams (as pxz or a concatenation writes it)
// whose second stream's block asks for a 4 GiB dictionary: the first
// block's small one must not let the second allocate it.
func TestListXzLaterBlockDictionaryLimited(t *testing.T) {
	t.Parallel()
	tarball := archivetest.Tar(sampleFiles())
	half := len(tarball) / 2 / 512 * 512
	first := xzStream(t, tarball[:half])
	second := xzStream(t, tarball[half:])
	askXzDict(t, second, 12, 40)
	x := append(append([]byte(nil), first...), second...)
	var l Listing
	var err error
	allocated := bytesAllocated(func() {
		l, err = memList(context.Background(), FormatTarXz, Limits{}, x)
	})
	if allocated > 2*maxDecoderWindow {
		t.Errorf("listing allocated %d MiB, over twice the %d MiB decoder window", allocated>>20, maxDecoderWindow>>20)
	}
	if err == nil {
		t.Fatalf("listed %d entries with no error; want the dictionary refused", len(l.Entries))
	}
	wantListError(t, err, FormatTarXz, "xz dictionary of 4095 MiB over the 128 MiB listing limit", ErrLimit)

	// The same header damaged (its CRC no longer holds): the decoder
	// refuses it as damage, before any dictionary is allocated.
	second[12+1] ^= 0x40 // the compressed size's presence flag
	x = append(append([]byte(nil), first...), second...)
	allocated = bytesAllocated(func() {
		_, err = memList(context.Background(), FormatTarXz, Limits{}, x)
	})
	if allocated > 2*maxDecoderWindow {
		t.Errorf("listing a damaged header allocated %d MiB", allocated>>20)
	}
	if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrLimit) {
		t.Errorf("a damaged block header: %v, want a malformed archive", err)
	}
}

// xzCLI compresses data with the xz tool and args.
func xzCLI(t *testing.T, data []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("xz", append([]string{"-c"}, args...)...)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xz %v: %v", args, err)
	}
	return out
}

// xzBlockOffsets returns where each block of the xz file x starts, as
// xz --list says.
func xzBlockOffsets(t *testing.T, x []byte) []int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.xz")
	if err := os.WriteFile(path, x, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("xz", "--robot", "--list", "-vv", path).Output()
	if err != nil {
		t.Fatalf("xz --list: %v", err)
	}
	var offs []int
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) > 4 && f[0] == "block" {
			off, err := strconv.Atoi(f[4])
			if err != nil {
				t.Fatalf("xz --list line %q: %v", line, err)
			}
			offs = append(offs, off)
		}
	}
	return offs
}

// The guard follows xz files as the xz tool writes them, many blocks,
// every kind of check, streams concatenated with padding between them,
// to their end; a later block of a file the tool wrote asking for more
// than the limit ends the listing with ErrLimit.
func TestXzGuardFollowsRealFiles(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("xz not installed")
	}
	files := append(sampleFiles(), archivetest.File{Name: "big.bin", Data: []byte(strings.Repeat("stashd lists, never extracts. ", 40000))})
	tarball := archivetest.Tar(files)
	var cases [][]byte
	for _, check := range []string{"none", "crc32", "crc64", "sha256"} {
		cases = append(cases, xzCLI(t, tarball, "--check="+check, "--block-size=100KiB", "-T2"))
	}
	half := len(tarball) / 2 / 512 * 512
	two := append(xzCLI(t, tarball[:half], "-1"), 0, 0, 0, 0)
	two = append(two, xzCLI(t, tarball[half:], "--block-size=64KiB", "--check=sha256")...)
	cases = append(cases, two, archivetest.TarXz(files))
	for i, x := range cases {
		g := newXzGuard(bytes.NewReader(x), maxDecoderWindow)
		if _, err := io.Copy(io.Discard, g); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if g.st != xzStreamPadding {
			t.Errorf("case %d: the walk ended in state %d, not after a stream's footer", i, g.st)
		}
		l, err := memList(context.Background(), FormatTarXz, Limits{}, x)
		if err != nil || len(l.Entries) != len(files) {
			t.Errorf("case %d: %d entries, %v", i, len(l.Entries), err)
		}
	}

	x := cases[1]
	offs := xzBlockOffsets(t, x)
	if len(offs) < 3 {
		t.Fatalf("xz wrote %d blocks, want several", len(offs))
	}
	askXzDict(t, x, offs[2], 40)
	_, err := memList(context.Background(), FormatTarXz, Limits{}, x)
	wantListError(t, err, FormatTarXz, "xz dictionary of 4095 MiB over the 128 MiB listing limit", ErrLimit)
}
