package tgsim

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// TDLib names a downloaded file after the document's file name cleaned by
// clean_filename (tdutils/td/utils/filesystem.cpp): characters file
// systems refuse or shells mangle become spaces, marks vanish, leading
// spaces and dots go, trailing ones too, and the stem is cut to 64
// characters and the extension to 20. A document named with 300 bytes
// is therefore stored under a name a file system accepts.
const (
	cleanStemMax      = 64
	cleanExtensionMax = 20
)

// cleanFilename is TDLib's clean_filename: "" for a name that is not
// UTF-8 or has nothing left.
func cleanFilename(name string) string {
	if !utf8.ValidString(name) {
		return ""
	}
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	stem, ext := name, ""
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		stem, ext = name[:i], name[i+1:]
	}
	stem = cleanFilenamePart(stem, cleanStemMax)
	ext = cleanFilenamePart(ext, cleanExtensionMax)
	switch {
	case ext == "":
		return stem
	case stem == "":
		return ext
	}
	return stem + "." + ext
}

// cleanFilenamePart is clean_filename_part: at most max characters of
// name, each kept, dropped (a mark or format character, which TDLib's
// search normalisation removes) or replaced by a space.
func cleanFilenamePart(name string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range name {
		if n >= max {
			break
		}
		if !filenameRuneOK(r) {
			if unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf) {
				continue
			}
			r = ' '
		}
		if b.Len() == 0 && (r == ' ' || r == '.') {
			continue
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimRight(b.String(), " .")
}

// filenameRuneOK reports whether clean_filename keeps r as it is: printable
// ASCII but for <>:"/\|?*&`' and, beyond ASCII, letters and numbers.
func filenameRuneOK(r rune) bool {
	switch {
	case r < 32:
		return false
	case r < 127:
		return !strings.ContainsRune("<>:\"/\\|?*&`'", r)
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r)
}
