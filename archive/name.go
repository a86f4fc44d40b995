package archive

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Format names an archive format. The zero value "" means "not an archive".
type Format string

// The formats stashd recognises. A multipart set has the format of its parts.
const (
	FormatNone   Format = ""
	FormatZip    Format = "zip"
	FormatRar    Format = "rar"
	Format7z     Format = "7z"
	FormatTar    Format = "tar"
	FormatTarGz  Format = "tar.gz"
	FormatTarBz2 Format = "tar.bz2"
	FormatTarXz  Format = "tar.xz"
	FormatTarZst Format = "tar.zst"
	FormatTarLz4 Format = "tar.lz4"
)

// Scheme names the multipart naming scheme of a part. The zero value ""
// means a single archive (or not an archive at all).
type Scheme string

// The multipart naming schemes ParseName recognises.
const (
	// SchemeNone is a single archive.
	SchemeNone Scheme = ""
	// SchemeRarPart is RAR's current naming: x.part1.rar, x.part01.rar, x.part001.rar.
	SchemeRarPart Scheme = "rar-part"
	// SchemeRarOld is RAR's old naming: x.rar (part 1), x.r00 (part 2), x.r01 (part 3) …
	// then x.s00 … and x.t00 …, up to 301 parts.
	SchemeRarOld Scheme = "rar-old"
	// SchemeNumbered is a byte split of a whole archive: x.7z.001, x.zip.001,
	// x.tar.gz.001 … (7-Zip, HJSplit and split(1) style; numbering starts at 001).
	SchemeNumbered Scheme = "numbered"
	// SchemeZipSplit is a zip split (spanned) set: x.z01, x.z02 … and the final x.zip.
	SchemeZipSplit Scheme = "zip-split"
)

// maxPartDigits bounds the part numbers ParseName accepts, so that a hostile
// name cannot ask OrderParts to reason about billions of missing parts.
const maxPartDigits = 4

// Name is what a file name alone says about an archive. The zero value is a
// file that is not an archive.
type Name struct {
	// Format is the archive format, "" when the file is not an archive.
	Format Format
	// Set is the normalised (lower-cased) name shared by all parts of a
	// multipart set, such as "x.rar", "x.7z", "x.zip" or "x.tar.gz"; "" for a
	// single archive.
	Set string
	// Part is the 1-based position of this file in its set (0 for single archives).
	Part int
	// Final is true for a part that is by definition the last of its set: the
	// .zip of a zip split set. ParseName never sets it, because a plain x.zip
	// cannot be told from a single archive by its name; OrderParts sets it in
	// SetOrder.Parts on the x.zip it adopts into a zip split set.
	Final bool
	// NeedsFinal is true for schemes whose set is only complete with its Final
	// part (zip split).
	NeedsFinal bool
	// Scheme is the multipart naming scheme, "" for a single archive.
	Scheme Scheme
	// Base is the normalised base name of the file (directories removed,
	// control characters dropped, lower-cased), set for every input, archive
	// or not. A single x.zip whose Base equals the Set of waiting x.zNN parts
	// is that set's final part, and a single x.rar whose Base equals the Set
	// of waiting x.rNN parts is that set's first part.
	Base string
}

// IsArchive reports whether the name is an archive or a part of one.
func (n Name) IsArchive() bool { return n.Format != FormatNone }

// IsMultipart reports whether the name is a part of a multipart set.
func (n Name) IsMultipart() bool { return n.Set != "" }

// ParseName classifies a file name, without any I/O. The name may carry a
// directory (either separator); only its base name counts. Matching is
// case-insensitive. Hostile input (NUL, control characters, invalid UTF-8,
// very long names) is tolerated: it never panics, and at worst the file is
// "not an archive".
//
// Rules for the ambiguous cases:
//   - a plain x.zip is a single archive; it is the Final part of a zip split
//     set only when OrderParts is given it together with x.zNN parts;
//   - a plain x.rar is a single archive; it is Part 1 of an old-style RAR set
//     only when OrderParts is given it together with x.rNN parts (x.r00 is
//     Part 2, x.r01 Part 3 …);
//   - part numbers must be 1 or more and have at most four digits (x.part0.rar
//     is a single rar, x.000 and x.rar.00001 are not archives).
func ParseName(fileName string) Name {
	base := normaliseBase(fileName)
	n := Name{Base: base}

	// x.<archive ext>.NNN: a byte split of a whole archive.
	if stem, num, ok := cutNumber(base, "."); ok && len(base)-len(stem) >= 4 {
		if f := singleFormat(stem); f != FormatNone && num >= 1 {
			n.Format, n.Set, n.Part, n.Scheme = f, stem, num, SchemeNumbered
		}
		return n
	}

	// x.partN.rar
	if stem, ok := strings.CutSuffix(base, ".rar"); ok {
		if set, num, ok := cutNumber(stem, ".part"); ok && num >= 1 {
			n.Format, n.Set, n.Part, n.Scheme = FormatRar, set+".rar", num, SchemeRarPart
			return n
		}
	}

	if dot := strings.LastIndexByte(base, '.'); dot >= 0 {
		stem, ext := base[:dot], base[dot+1:]
		// x.r00 … x.t99: old-style RAR volumes after the first.
		if len(ext) == 3 && ext[0] >= 'r' && ext[0] <= 't' && isDigits(ext[1:]) {
			num, _ := strconv.Atoi(ext[1:])
			n.Format, n.Set, n.Scheme = FormatRar, stem+".rar", SchemeRarOld
			n.Part = int(ext[0]-'r')*100 + num + 2
			return n
		}
		// x.z01 … x.z999: zip split parts before the final x.zip.
		if (len(ext) == 3 || len(ext) == 4) && ext[0] == 'z' && isDigits(ext[1:]) {
			if num, _ := strconv.Atoi(ext[1:]); num >= 1 {
				n.Format, n.Set, n.Part, n.Scheme = FormatZip, stem+".zip", num, SchemeZipSplit
				n.NeedsFinal = true
				return n
			}
		}
	}

	n.Format = singleFormat(base)
	return n
}

// normaliseBase returns the lower-cased base name of fileName with invalid
// UTF-8 replaced, control and zero-width characters dropped, leading
// spaces trimmed and trailing spaces and dots trimmed (Windows drops
// them: "x.zip." is saved as x.zip). A name is classified as what it
// shows: "x.zip" followed by a zero-width space is a zip to whoever reads it.
func normaliseBase(fileName string) string {
	if i := strings.LastIndexAny(fileName, `/\`); i >= 0 {
		fileName = fileName[i+1:]
	}
	var b strings.Builder
	b.Grow(len(fileName))
	for i, r := range fileName {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(fileName[i:]); size == 1 {
				b.WriteRune(utf8.RuneError)
				continue
			}
		}
		if unicode.IsControl(r) || isZeroWidth(r) {
			continue
		}
		b.WriteRune(r)
	}
	base := strings.TrimRightFunc(b.String(), func(r rune) bool { return r == '.' || unicode.IsSpace(r) })
	return strings.ToLower(strings.TrimLeftFunc(base, unicode.IsSpace))
}

// singleFormat returns the format a base name's extension gives a single
// archive. Longer suffixes come first so that ".tar.gz" wins over ".gz".
func singleFormat(base string) Format {
	suffixes := [...]struct {
		suffix string
		format Format
	}{
		{".tar.gz", FormatTarGz},
		{".tar.bz2", FormatTarBz2},
		{".tar.xz", FormatTarXz},
		{".tar.zst", FormatTarZst},
		{".tar.zstd", FormatTarZst},
		{".tar.lz4", FormatTarLz4},
		{".tgz", FormatTarGz},
		{".tbz2", FormatTarBz2},
		{".tbz", FormatTarBz2},
		{".txz", FormatTarXz},
		{".tzst", FormatTarZst},
		{".tlz4", FormatTarLz4},
		{".tar", FormatTar},
		{".zip", FormatZip},
		{".rar", FormatRar},
		{".7z", Format7z},
	}
	for _, s := range suffixes {
		if strings.HasSuffix(base, s.suffix) {
			return s.format
		}
	}
	return FormatNone
}

// cutNumber splits s into the part before sep+digits and the number, when s
// ends with sep followed by 1..maxPartDigits digits (3..4 for a bare ".").
func cutNumber(s, sep string) (stem string, num int, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", 0, false
	}
	digits := s[i+len(sep):]
	minDigits := 1
	if sep == "." {
		minDigits = 3 // x.001; a bare x.1 is too ambiguous to call a part
	}
	if len(digits) < minDigits || len(digits) > maxPartDigits || !isDigits(digits) {
		return "", 0, false
	}
	num, _ = strconv.Atoi(digits)
	return s[:i], num, true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// maxReportedMissing bounds SetOrder.Missing; Reason still summarises every gap.
const maxReportedMissing = 64

// SetOrder is OrderParts's verdict on a candidate multipart set.
type SetOrder struct {
	// Complete is true when the names form a whole set as far as names can
	// tell: parts contiguous from 1, no duplicates, and the final part present
	// when the scheme needs one. Whether the highest numbered part of a
	// rar-part, rar-old or numbered set is really the last one only the
	// archive can tell (List reports a missing next volume as an error).
	Complete bool
	// Order holds indices into the names given to OrderParts, in part order
	// (the final .zip last). It is nil unless Complete.
	Order []int
	// Parts holds the names in Order, with an adopted x.zip turned into the
	// Final part and an adopted x.rar into Part 1 of the set. Nil unless Complete.
	Parts []Name
	// Set is the set's name ("" when the names do not form one set).
	Set string
	// Missing holds the missing part numbers, ascending, at most 64 of them.
	Missing []int
	// MissingFinal is true when the scheme needs a final part and none was given.
	MissingFinal bool
	// Reason says in a few words why the set is not complete, for a dead
	// letter ("parts 2, 4-7 missing", "final .zip missing"); "" when Complete.
	Reason string
}

// OrderParts decides whether names (the parsed names of the files of one
// candidate set, in any order) form a complete multipart set, and orders them.
// A single archive on its own is a complete set of one. A single x.zip or
// x.rar among x.zNN or x.rNN parts of the same Set is adopted as the final
// part or the first part (see ParseName).
func OrderParts(names []Name) SetOrder {
	if len(names) == 0 {
		return SetOrder{Reason: "no parts"}
	}
	var set string
	var scheme Scheme
	for _, n := range names {
		if !n.IsMultipart() {
			continue
		}
		if set == "" {
			set, scheme = n.Set, n.Scheme
			continue
		}
		if n.Set != set || n.Scheme != scheme {
			return SetOrder{Reason: fmt.Sprintf("parts of different sets (%s, %s)", set, n.Set)}
		}
	}
	if set == "" {
		if len(names) == 1 && names[0].IsArchive() {
			return SetOrder{Complete: true, Order: []int{0}, Parts: []Name{names[0]}}
		}
		return SetOrder{Reason: "not a multipart set"}
	}

	res := SetOrder{Set: set}
	byPart := make(map[int]int, len(names))
	final := -1
	maxPart := 0
	for i, n := range names {
		switch {
		case n.IsMultipart():
			if _, dup := byPart[n.Part]; dup {
				res.Reason = fmt.Sprintf("part %d appears twice", n.Part)
				return res
			}
			byPart[n.Part] = i
			maxPart = max(maxPart, n.Part)
		case scheme == SchemeZipSplit && n.Format == FormatZip && n.Base == set:
			if final >= 0 {
				res.Reason = "final .zip appears twice"
				return res
			}
			final = i
		case scheme == SchemeRarOld && n.Format == FormatRar && n.Base == set:
			if _, dup := byPart[1]; dup {
				res.Reason = "part 1 appears twice"
				return res
			}
			byPart[1] = i
			maxPart = max(maxPart, 1)
		default:
			res.Reason = fmt.Sprintf("%s is not a part of set %s", n.Base, set)
			return res
		}
	}

	var gaps []string
	missingCount := 0
	for p := 1; p <= maxPart; p++ {
		if _, ok := byPart[p]; ok {
			continue
		}
		start := p
		for p+1 <= maxPart {
			if _, ok := byPart[p+1]; ok {
				break
			}
			p++
		}
		for q := start; q <= p && len(res.Missing) < maxReportedMissing; q++ {
			res.Missing = append(res.Missing, q)
		}
		missingCount += p - start + 1
		if start == p {
			gaps = append(gaps, strconv.Itoa(p))
		} else {
			gaps = append(gaps, fmt.Sprintf("%d-%d", start, p))
		}
	}
	needsFinal := scheme == SchemeZipSplit
	res.MissingFinal = needsFinal && final < 0

	var reasons []string
	if missingCount > 0 {
		word := "parts"
		if missingCount == 1 {
			word = "part"
		}
		reasons = append(reasons, word+" "+strings.Join(gaps, ", ")+" missing")
	}
	if res.MissingFinal {
		reasons = append(reasons, "final .zip missing")
	}
	if len(reasons) > 0 {
		res.Reason = strings.Join(reasons, "; ")
		return res
	}

	res.Complete = true
	res.Order = make([]int, 0, maxPart+1)
	for p := 1; p <= maxPart; p++ {
		res.Order = append(res.Order, byPart[p])
	}
	if final >= 0 {
		res.Order = append(res.Order, final)
	}
	res.Parts = make([]Name, len(res.Order))
	for i, idx := range res.Order {
		n := names[idx]
		if !n.IsMultipart() {
			// An adopted single: x.rar as part 1, or x.zip as the final part.
			n.Set, n.Scheme, n.Part = set, scheme, i+1
			n.Final = scheme == SchemeZipSplit
			n.NeedsFinal = scheme == SchemeZipSplit
		}
		res.Parts[i] = n
	}
	return res
}
