package archive

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Name // Base is checked separately
	}{
		// Single archives.
		{"film.zip", Name{Format: FormatZip}},
		{"FILM.ZIP", Name{Format: FormatZip}},
		{"a.b.c.rar", Name{Format: FormatRar}},
		{"x.7z", Name{Format: Format7z}},
		{"x.tar", Name{Format: FormatTar}},
		{"x.tar.gz", Name{Format: FormatTarGz}},
		{"x.TGZ", Name{Format: FormatTarGz}},
		{"x.tar.bz2", Name{Format: FormatTarBz2}},
		{"x.tbz2", Name{Format: FormatTarBz2}},
		{"x.tbz", Name{Format: FormatTarBz2}},
		{"x.tar.xz", Name{Format: FormatTarXz}},
		{"x.txz", Name{Format: FormatTarXz}},
		{"x.tar.zst", Name{Format: FormatTarZst}},
		{"x.tar.zstd", Name{Format: FormatTarZst}},
		{"x.tzst", Name{Format: FormatTarZst}},
		{"dir/sub/x.zip", Name{Format: FormatZip}},
		{`C:\dl\x.rar`, Name{Format: FormatRar}},
		{"  spaced.zip  ", Name{Format: FormatZip}},
		{"x.part0.rar", Name{Format: FormatRar}},     // part numbers start at 1
		{"x.part12345.rar", Name{Format: FormatRar}}, // more than four digits: not a part
		{"партия.zip", Name{Format: FormatZip}},      // non-ASCII stem
		{".zip", Name{Format: FormatZip}},            // empty stem is still a zip name
		{"x.zip\x00", Name{Format: FormatZip}},       // control characters are dropped
		{"\x00x\x01.7z", Name{Format: Format7z}},     //
		{"x.r\u0430r", Name{}},                       // Cyrillic 'а' is not 'a'
		{"x.zip.txt", Name{}},                        //
		{"x.gz", Name{}},                             // a lone gzip is not an archive here
		{"x.bz2", Name{}},                            //
		{"x.pdf", Name{}},                            //
		{"x.jpg", Name{}},                            //
		{"setup.exe", Name{}},                        //
		{"notes.txt", Name{}},                        //
		{"zip", Name{}},                              // no dot
		{"rar", Name{}},                              //
		{"x.zipx", Name{}},                           //
		{"", Name{}},                                 //
		{".", Name{}},                                //
		{"x.zip/", Name{}},                           // a directory, base is empty
		{"\xff\xfe.zip", Name{Format: FormatZip}},    // invalid UTF-8 stem
		{"x.\xffzip", Name{}},                        //
		{"x.001", Name{}},                            // numbered split of an unknown format
		{"movie.mkv.001", Name{}},                    //
		{"x.zip.000", Name{}},                        // numbering starts at 001
		{"x.zip.1", Name{}},                          // too few digits for a numbered split
		{"x.zip.00001", Name{}},                      // too many
		{"x.rar.001.txt", Name{}},                    //
		{"x.z00", Name{}},                            // zip split parts start at z01
		{"x.zz1", Name{}},                            //
		{"x.r0", Name{}},                             //
		{"x.u00", Name{}},                            // rar old style stops at t99
		{"report.2024", Name{}},                      // a year is not a part of a known format
		{"x.part1.rar.txt", Name{}},                  //

		// RAR, current naming.
		{"x.part1.rar", Name{Format: FormatRar, Set: "x.rar", Part: 1, Scheme: SchemeRarPart}},
		{"x.part01.rar", Name{Format: FormatRar, Set: "x.rar", Part: 1, Scheme: SchemeRarPart}},
		{"x.part001.rar", Name{Format: FormatRar, Set: "x.rar", Part: 1, Scheme: SchemeRarPart}},
		{"X.Part12.RAR", Name{Format: FormatRar, Set: "x.rar", Part: 12, Scheme: SchemeRarPart}},
		{"my.film.2020.part3.rar", Name{Format: FormatRar, Set: "my.film.2020.rar", Part: 3, Scheme: SchemeRarPart}},
		{"x.part9999.rar", Name{Format: FormatRar, Set: "x.rar", Part: 9999, Scheme: SchemeRarPart}},

		// RAR, old naming.
		{"x.r00", Name{Format: FormatRar, Set: "x.rar", Part: 2, Scheme: SchemeRarOld}},
		{"x.r01", Name{Format: FormatRar, Set: "x.rar", Part: 3, Scheme: SchemeRarOld}},
		{"x.R99", Name{Format: FormatRar, Set: "x.rar", Part: 101, Scheme: SchemeRarOld}},
		{"x.s00", Name{Format: FormatRar, Set: "x.rar", Part: 102, Scheme: SchemeRarOld}},
		{"x.t99", Name{Format: FormatRar, Set: "x.rar", Part: 301, Scheme: SchemeRarOld}},

		// Numbered splits.
		{"x.7z.001", Name{Format: Format7z, Set: "x.7z", Part: 1, Scheme: SchemeNumbered}},
		{"x.7Z.012", Name{Format: Format7z, Set: "x.7z", Part: 12, Scheme: SchemeNumbered}},
		{"x.zip.001", Name{Format: FormatZip, Set: "x.zip", Part: 1, Scheme: SchemeNumbered}},
		{"x.rar.002", Name{Format: FormatRar, Set: "x.rar", Part: 2, Scheme: SchemeNumbered}},
		{"x.tar.gz.003", Name{Format: FormatTarGz, Set: "x.tar.gz", Part: 3, Scheme: SchemeNumbered}},
		{"x.tgz.001", Name{Format: FormatTarGz, Set: "x.tgz", Part: 1, Scheme: SchemeNumbered}},
		{"x.tar.1000", Name{Format: FormatTar, Set: "x.tar", Part: 1000, Scheme: SchemeNumbered}},

		// Zip split.
		{"x.z01", Name{Format: FormatZip, Set: "x.zip", Part: 1, NeedsFinal: true, Scheme: SchemeZipSplit}},
		{"x.Z02", Name{Format: FormatZip, Set: "x.zip", Part: 2, NeedsFinal: true, Scheme: SchemeZipSplit}},
		{"x.z100", Name{Format: FormatZip, Set: "x.zip", Part: 100, NeedsFinal: true, Scheme: SchemeZipSplit}},
	}
	for _, tt := range tests {
		got := ParseName(tt.in)
		got.Base = ""
		if got != tt.want {
			t.Errorf("ParseName(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if got.IsArchive() != (tt.want.Format != "") || got.IsMultipart() != (tt.want.Set != "") {
			t.Errorf("ParseName(%q): IsArchive %v IsMultipart %v", tt.in, got.IsArchive(), got.IsMultipart())
		}
	}
}

func TestParseNameBase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Dir/Sub/X.ZIP":   "x.zip",
		`a\b\C.rar`:       "c.rar",
		" x.zip\x00 ":     "x.zip",
		"\xffA.7z":        "\ufffda.7z",
		"notes.TXT":       "notes.txt",
		"Фильм.part1.RAR": "фильм.part1.rar",
	} {
		if got := ParseName(in).Base; got != want {
			t.Errorf("ParseName(%q).Base = %q, want %q", in, got, want)
		}
	}
}

func TestParseNameHostile(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 1<<20)
	for _, in := range []string{
		long + ".zip",
		long + ".part1.rar",
		strings.Repeat(".", 10000),
		strings.Repeat("/", 10000),
		strings.Repeat("\x00", 1000) + ".7z",
		strings.Repeat("\xff", 1000),
		"x.part" + strings.Repeat("9", 1000) + ".rar",
		"x." + strings.Repeat("0", 1000),
		"x.z" + strings.Repeat("9", 1000),
	} {
		n := ParseName(in)
		if !utf8.ValidString(n.Base) || !utf8.ValidString(n.Set) {
			t.Errorf("ParseName(%.20q…) gave invalid UTF-8", in)
		}
		if n.Part < 0 || n.Part > 10000 {
			t.Errorf("ParseName(%.20q…) part %d out of range", in, n.Part)
		}
	}
	if n := ParseName(long + ".zip"); n.Format != FormatZip {
		t.Errorf("a 1 MiB name lost its format: %+v", n.Format)
	}
}

func names(in ...string) []Name {
	out := make([]Name, len(in))
	for i, s := range in {
		out[i] = ParseName(s)
	}
	return out
}

func TestOrderParts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        []string
		complete  bool
		order     []int
		reason    string
		missing   []int
		noFinal   bool
		finalPart int // the Part OrderParts gives an adopted single, 0 when none
	}{
		{"single archive", []string{"x.zip"}, true, []int{0}, "", nil, false, 0},
		{"rar parts shuffled", []string{"x.part3.rar", "x.part1.rar", "x.part2.rar"}, true, []int{1, 2, 0}, "", nil, false, 0},
		{"padded numbers mix", []string{"x.part01.rar", "x.part2.rar"}, true, []int{0, 1}, "", nil, false, 0},
		{"one part of one", []string{"x.part1.rar"}, true, []int{0}, "", nil, false, 0},
		{"7z numbered", []string{"x.7z.002", "x.7z.001"}, true, []int{1, 0}, "", nil, false, 0},
		{"tar.gz numbered", []string{"x.tar.gz.001", "x.tar.gz.002", "x.tar.gz.003"}, true, []int{0, 1, 2}, "", nil, false, 0},
		{"zip split complete", []string{"x.zip", "x.z02", "x.z01"}, true, []int{2, 1, 0}, "", nil, false, 3},
		{"zip split case differs", []string{"X.ZIP", "x.z01"}, true, []int{1, 0}, "", nil, false, 2},
		{"zip split without final", []string{"x.z01", "x.z02"}, false, nil, "final .zip missing", nil, true, 0},
		{"zip split gap and no final", []string{"x.z01", "x.z03"}, false, nil, "part 2 missing; final .zip missing", []int{2}, true, 0},
		{"final alone is single", []string{"x.zip"}, true, []int{0}, "", nil, false, 0},
		{"old rar complete", []string{"x.r01", "x.rar", "x.r00"}, true, []int{1, 2, 0}, "", nil, false, 1},
		{"old rar without first", []string{"x.r00", "x.r01"}, false, nil, "part 1 missing", []int{1}, false, 0},
		{"gaps", []string{"x.part1.rar", "x.part3.rar", "x.part8.rar"}, false, nil, "parts 2, 4-7 missing", []int{2, 4, 5, 6, 7}, false, 0},
		{"first missing", []string{"x.7z.002"}, false, nil, "part 1 missing", []int{1}, false, 0},
		{"duplicate", []string{"x.part1.rar", "x.part01.rar"}, false, nil, "part 1 appears twice", nil, false, 0},
		{"duplicate final", []string{"x.z01", "x.zip", "X.zip"}, false, nil, "final .zip appears twice", nil, false, 0},
		{"mixed sets", []string{"x.part1.rar", "y.part2.rar"}, false, nil, "parts of different sets (x.rar, y.rar)", nil, false, 0},
		{"mixed schemes", []string{"x.part1.rar", "x.r00"}, false, nil, "parts of different sets (x.rar, x.rar)", nil, false, 0},
		{"stranger single", []string{"x.part1.rar", "y.zip"}, false, nil, "y.zip is not a part of set x.rar", nil, false, 0},
		{"zip final of other set", []string{"x.z01", "y.zip"}, false, nil, "y.zip is not a part of set x.zip", nil, false, 0},
		{"non-archive", []string{"x.part1.rar", "x.txt"}, false, nil, "x.txt is not a part of set x.rar", nil, false, 0},
		{"two singles", []string{"a.zip", "b.zip"}, false, nil, "not a multipart set", nil, false, 0},
		{"not an archive", []string{"a.txt"}, false, nil, "not a multipart set", nil, false, 0},
		{"nothing", nil, false, nil, "no parts", nil, false, 0},
	}
	for _, tt := range tests {
		got := OrderParts(names(tt.in...))
		if got.Complete != tt.complete || !slices.Equal(got.Order, tt.order) || got.Reason != tt.reason ||
			!slices.Equal(got.Missing, tt.missing) || got.MissingFinal != tt.noFinal {
			t.Errorf("%s: OrderParts(%q) = %+v", tt.name, tt.in, got)
			continue
		}
		if got.Complete {
			if len(got.Parts) != len(got.Order) {
				t.Errorf("%s: %d parts for %d indices", tt.name, len(got.Parts), len(got.Order))
				continue
			}
			for i, p := range got.Parts {
				if len(got.Parts) > 1 && (p.Part != i+1 || p.Set == "") {
					t.Errorf("%s: part %d is %+v", tt.name, i, p)
				}
			}
			if tt.finalPart != 0 {
				adopted := got.Parts[tt.finalPart-1]
				wantFinal := strings.HasSuffix(adopted.Base, ".zip")
				if adopted.Final != wantFinal {
					t.Errorf("%s: adopted part %+v, Final should be %v", tt.name, adopted, wantFinal)
				}
			}
		}
	}
}

func TestOrderPartsBoundsMissing(t *testing.T) {
	t.Parallel()
	got := OrderParts(names("x.part1.rar", "x.part9999.rar"))
	if got.Complete || len(got.Missing) != maxReportedMissing || got.Missing[0] != 2 {
		t.Fatalf("got %+v", got.Missing)
	}
	if got.Reason != "parts 2-9998 missing" {
		t.Errorf("reason %q", got.Reason)
	}
}

// A name that shows as an archive's is one: Windows drops trailing dots
// and spaces ("x.zip." is saved as x.zip), and a zero-width character
// (after the extension, or inside it) takes no room on screen. Such a
// file is classified as the archive it shows, so that it is downloaded
// and its bytes judged rather than passed over as no archive; a name
// whose visible extension is another stays no archive.
func TestParseNameInvisibleSuffix(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in     string
		format Format
		base   string
	}{
		{"x.zip.", FormatZip, "x.zip"},
		{"x.zip. . ", FormatZip, "x.zip"},
		{"x.zip\u200b", FormatZip, "x.zip"},
		{"x.z\u200dip", FormatZip, "x.zip"},
		{"x.tar.gz\ufeff", FormatTarGz, "x.tar.gz"},
		{"x.part1.rar\u2060", FormatRar, "x.part1.rar"},
		{"x.7z\u00ad.", Format7z, "x.7z"},
		{"x.zip.txt", FormatNone, "x.zip.txt"},
		{"...", FormatNone, ""},
	} {
		n := ParseName(tt.in)
		if n.Format != tt.format || n.Base != tt.base {
			t.Errorf("ParseName(%q) = %q, base %q; want %q, base %q", tt.in, n.Format, n.Base, tt.format, tt.base)
		}
	}
}
