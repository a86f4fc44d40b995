package archive

import (
	"bytes"
	"io"
)

// sniffLen is how many leading bytes Sniff looks at: the tar magic sits at
// offset 257.
const sniffLen = 512

// Sniff returns the format the leading bytes of a file name by their magic
// number, or FormatNone when they name none (a self-extracting archive, a
// pre-POSIX tar, not an archive). A bare compressed stream is taken for a
// compressed tar, the only kind stashd lists.
func Sniff(head []byte) Format {
	magics := [...]struct {
		magic  string
		format Format
	}{
		{"PK\x03\x04", FormatZip},
		{"PK\x05\x06", FormatZip}, // an empty zip
		{"PK\x07\x08", FormatZip}, // the first part of a split zip
		{"Rar!\x1a\x07", FormatRar},
		{"7z\xbc\xaf\x27\x1c", Format7z},
		{"\x1f\x8b", FormatTarGz},
		{"BZh", FormatTarBz2},
		{"\xfd7zXZ\x00", FormatTarXz},
		{"\x28\xb5\x2f\xfd", FormatTarZst},
	}
	for _, m := range magics {
		if bytes.HasPrefix(head, []byte(m.magic)) {
			return m.format
		}
	}
	if len(head) >= 263 && string(head[257:262]) == "ustar" {
		return FormatTar
	}
	return FormatNone
}

// sniffParts reads the head of the first part and returns the format it
// names, FormatNone when it names none or cannot be read.
func sniffParts(src *partSet) Format {
	if src.Len() == 0 {
		return FormatNone
	}
	r, size := src.Part(0)
	head := make([]byte, min(size, sniffLen))
	if _, err := r.ReadAt(head, 0); err != nil && err != io.EOF {
		return FormatNone
	}
	return Sniff(head)
}
