package archive

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"stashd/archive/archivetest"
)

// sevenZipOf writes files (name → bytes) into a new directory and packs
// them with the 7z command and args; it returns the archive's volumes.
func sevenZipOf(t testing.TB, files map[string][]byte, args ...string) [][]byte {
	t.Helper()
	src, out := t.TempDir(), t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("7z", append(append([]string{"a", "-bd", "-y"}, args...), filepath.Join(out, "a.7z"), ".")...)
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("7z %v: %v\n%s", args, err, b)
	}
	paths, _ := filepath.Glob(filepath.Join(out, "a.7z*"))
	sort.Strings(paths)
	var vols [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		vols = append(vols, b)
	}
	return vols
}

// noise returns n bytes that do not compress, drawn from seed.
func noise(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// checkedFiles counts l's files whose CRC-32 was checked against their
// data, and its files.
func checkedFiles(l Listing) (checked, files int) {
	for _, e := range l.Entries {
		if e.Dir {
			continue
		}
		files++
		if e.CRCChecked {
			checked++
		}
	}
	return checked, files
}

// A 7z's files are checked against the CRC-32s its header records, by
// decoding their data, for the coders the listing reads (Copy, LZMA,
// LZMA2), as a zip's are: the content signature then stands on the bytes.
// A filter chain leaves them unchecked.
func TestList7zChecksDataAgainstTheHeadersCRCs(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("7z"); err != nil {
		t.Skip("7z command not installed (apt-get install p7zip-full)")
	}
	files := map[string][]byte{
		"a.txt":   bytes.Repeat([]byte("stashd "), 3000),
		"b.bin":   noise(1, 20000),
		"c.txt":   []byte("small"),
		"empty":   nil,
		"d.bin":   noise(2, 9000),
		"e.words": bytes.Repeat([]byte("judged by their bytes "), 500),
	}
	for _, tc := range []struct {
		name    string
		args    []string
		checked bool
	}{
		{"lzma2 solid", nil, true},
		{"lzma non-solid", []string{"-m0=lzma", "-ms=off"}, true},
		{"copy", []string{"-m0=copy"}, true},
		{"volumes", []string{"-v7k"}, true},
		{"bcj chain", []string{"-m0=BCJ", "-m1=LZMA"}, false},
	} {
		vols := sevenZipOf(t, files, tc.args...)
		l, err := memList(context.Background(), Format7z, Limits{}, vols...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		checked, all := checkedFiles(l)
		if all != len(files) {
			t.Fatalf("%s: %d files listed, want %d", tc.name, all, len(files))
		}
		// An empty file has no data to differ from its CRC: it counts as
		// checked whatever the coder.
		if want := map[bool]int{true: all, false: 1}[tc.checked]; checked != want {
			t.Errorf("%s: %d of %d files checked against their data, want %d", tc.name, checked, all, want)
		}
		if SignatureChecked(l.Entries) != tc.checked {
			t.Errorf("%s: SignatureChecked = %v, want %v", tc.name, !tc.checked, tc.checked)
		}
	}
}

// Damaged data under an intact header is a broken archive: a byte changed
// in a stored file, or in a compressed stream, and a set's middle volume
// taken from another upload of the same layout (its header, at the end,
// is the set's own).
func TestList7zRefusesDataItsHeaderDoesNotDescribe(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("7z"); err != nil {
		t.Skip("7z command not installed (apt-get install p7zip-full)")
	}
	files := map[string][]byte{"a.bin": noise(3, 12000), "b.txt": bytes.Repeat([]byte("part of the set "), 800)}

	stored := sevenZipOf(t, files, "-m0=copy")[0]
	flip := func(b []byte, at int) []byte {
		b = bytes.Clone(b)
		b[at] ^= 0x55
		return b
	}
	_, err := memList(context.Background(), Format7z, Limits{}, flip(stored, sz7SignatureLen+100))
	wantListError(t, err, Format7z, "CRC-32", ErrMalformed)

	packed := sevenZipOf(t, files)[0]
	_, err = memList(context.Background(), Format7z, Limits{}, flip(packed, sz7SignatureLen+100))
	wantListError(t, err, Format7z, "entry ", ErrMalformed)

	other := map[string][]byte{"a.bin": noise(4, 12000), "b.txt": bytes.Repeat([]byte("part of the set "), 800)}
	a, b := sevenZipOf(t, files, "-v5k"), sevenZipOf(t, other, "-v5k")
	if len(a) < 3 || len(a) != len(b) || len(a[1]) != len(b[1]) {
		t.Fatalf("volumes of %d and %d parts; the test needs two sets of three or more alike", len(a), len(b))
	}
	if _, err := memList(context.Background(), Format7z, Limits{}, a...); err != nil {
		t.Fatalf("the set whole: %v", err)
	}
	mixed := append([][]byte{a[0], b[1]}, a[2:]...)
	_, err = memList(context.Background(), Format7z, Limits{}, mixed...)
	wantListError(t, err, Format7z, "entry ", ErrMalformed)
}

// The check decodes at most sz7DataBudget bytes: files past it are listed
// unchecked, and the content signature is then a claim. The simulator's
// and the tests' own 7z builder writes archives the check accepts.
func TestList7zChecksWithinItsBudget(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("7z"); err != nil {
		t.Skip("7z command not installed (apt-get install p7zip-full)")
	}
	files := map[string][]byte{"1.bin": noise(5, sz7DataBudget/2), "2.bin": noise(6, sz7DataBudget/4), "3.bin": noise(7, sz7DataBudget/2)}
	l, err := memList(context.Background(), Format7z, Limits{}, sevenZipOf(t, files, "-m0=copy")...)
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, e := range l.Entries {
		checked[e.Path] = e.CRCChecked
	}
	if want := map[string]bool{"1.bin": true, "2.bin": true, "3.bin": false}; len(checked) != 3 || checked["1.bin"] != want["1.bin"] || checked["2.bin"] != want["2.bin"] || checked["3.bin"] != want["3.bin"] {
		t.Errorf("files checked against their data: %v; want %v", checked, want)
	}
	if SignatureChecked(l.Entries) {
		t.Error("SignatureChecked with a file past the budget unchecked")
	}

	l, err = memList(context.Background(), Format7z, Limits{}, archivetest.SevenZip(sampleFiles()))
	if err != nil {
		t.Fatal(err)
	}
	if c, all := checkedFiles(l); c != all || all == 0 {
		t.Errorf("archivetest.SevenZip: %d of %d files checked", c, all)
	}
}

// BenchmarkList7zChecksLZMA2 lists an LZMA2 7z whose files hold more than
// the check's budget: the figure is the cost of decoding that budget (the
// bytes it checks a second), the hash aside.
func BenchmarkList7zChecksLZMA2(b *testing.B) {
	if _, err := exec.LookPath("7z"); err != nil {
		b.Skip("7z command not installed (apt-get install p7zip-full)")
	}
	words := bytes.Repeat([]byte("judged by their bytes, never by their names "), 1<<12)
	files := map[string][]byte{}
	for i := range 6 {
		files[string(rune('a'+i))+".txt"] = append(bytes.Clone(words), noise(uint64(i), 1<<20)...)
	}
	vols := sevenZipOf(b, files)
	b.SetBytes(sz7DataBudget)
	b.ResetTimer()
	for b.Loop() {
		l, err := memList(context.Background(), Format7z, Limits{}, vols...)
		if err != nil {
			b.Fatal(err)
		}
		if c, _ := checkedFiles(l); c == 0 {
			b.Fatal("no file checked")
		}
	}
}

// A byte-split 7z's middle volume posted twice, same name and size, one
// copy's data damaged: the files' CRC-32s tell the copies apart, and the
// set is assembled from the good one (the header, in the last volume,
// accepts either).
func TestAssembleTellsA7zVolumesCopiesApartByTheirData(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("7z"); err != nil {
		t.Skip("7z command not installed (apt-get install p7zip-full)")
	}
	vols := sevenZipOf(t, map[string][]byte{"data.bin": noise(8, 12000)}, "-m0=copy", "-v5k")
	if len(vols) != 3 {
		t.Fatalf("%d volumes; the test needs three", len(vols))
	}
	damaged := bytes.Clone(vols[1])
	damaged[100] ^= 0xff
	cands := candidates(t,
		posted{"x.7z.001", vols[0]},
		posted{"x.7z.002", damaged},
		posted{"x.7z.002", vols[1]},
		posted{"x.7z.003", vols[2]},
	)
	a := Assemble(context.Background(), cands, Limits{})
	if !a.Complete || a.Err != nil {
		t.Fatalf("assembly %+v", a)
	}
	if !slices.Equal(a.Order, []int{0, 2, 3}) {
		t.Errorf("order %v, want [0 2 3]: the good copy of x.7z.002", a.Order)
	}
	if len(a.Rejected) != 1 || a.Rejected[0].Index != 1 {
		t.Errorf("rejected %+v; want the damaged copy", a.Rejected)
	}
}

// A non-solid 7z keeps a folder per file: the check decodes the first
// sz7MaxCheckedFolders of them, and lists the rest unchecked.
func TestList7zChecksABoundedNumberOfFolders(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("7z"); err != nil {
		t.Skip("7z command not installed (apt-get install p7zip-full)")
	}
	files := map[string][]byte{}
	for i := range sz7MaxCheckedFolders + 10 {
		files[fmt.Sprintf("f%05d.txt", i)] = fmt.Appendf(nil, "file %d of many, each a folder of its own\n", i)
	}
	l, err := memList(context.Background(), Format7z, Limits{}, sevenZipOf(t, files, "-ms=off")...)
	if err != nil {
		t.Fatal(err)
	}
	if c, all := checkedFiles(l); c != sz7MaxCheckedFolders || all != len(files) {
		t.Errorf("%d of %d files checked, want %d", c, all, sz7MaxCheckedFolders)
	}
}
