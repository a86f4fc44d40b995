package archive

import (
	"bytes"
	"hash/crc32"
	"io"
)

// sniffLen is how many leading bytes Sniff looks at: the tar magic sits at
// offset 257.
const sniffLen = 512

// sfxSearch is how far into a self-extracting executable Detect looks for
// the 7z or RAR signature of the archive appended to its stub (7-Zip's and
// WinRAR's stubs are a few hundred KiB).
const sfxSearch = 4 << 20

// Sniff returns the format the leading bytes of a file name by their magic
// number, or FormatNone when they name none (a self-extracting archive, a
// pre-POSIX tar, not an archive: Detect looks further). A bare compressed
// stream is taken for a compressed tar, the only kind stashd lists.
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
		{"\x04\x22\x4d\x18", FormatTarLz4},
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

// Detection is what the bytes of a file say it is, whatever its name.
type Detection struct {
	// Format is the format the bytes are, FormatNone when they are no
	// archive stashd lists.
	Format Format
	// Offset is where the archive starts: the size of a self-extractor's
	// stub before it, 0 for a plain archive.
	Offset int64
	// SFX is true for an executable carrying an archive: a Windows ("MZ"),
	// ELF or Mach-O program, or a script, with the archive after it.
	SFX bool
}

// Detect reads the head of r (and, for an executable or unknown bytes, its
// tail and first few MiB) and says which archive format the bytes are.
// Zero bytes are never an archive. It reads at most sfxSearch bytes.
func Detect(r io.ReaderAt, size int64) Detection {
	if size <= 0 {
		return Detection{}
	}
	head := make([]byte, min(size, sniffLen))
	if n, err := r.ReadAt(head, 0); n < len(head) && err != nil {
		return Detection{}
	}
	if f := Sniff(head); f != FormatNone {
		return Detection{Format: f}
	}
	sfx := executable(head)
	// A zip's end record sits at its end, whatever precedes the archive:
	// a stub (self-extractor) or junk.
	if zipTailEnd(r, size) {
		return Detection{Format: FormatZip, SFX: sfx}
	}
	if !sfx {
		return Detection{}
	}
	buf := make([]byte, min(size, sfxSearch))
	n, _ := r.ReadAt(buf, 0)
	buf = buf[:n]
	for _, m := range [...]struct {
		sig    string
		format Format
	}{{sz7Signature, Format7z}, {rarSigPrefix, FormatRar}} {
		// The signature may also appear inside the stub's own data: take
		// the first occurrence whose header checks out.
		for from := 0; ; {
			i := bytes.Index(buf[from:], []byte(m.sig))
			if i < 0 {
				break
			}
			at := from + i
			if m.format == Format7z && sevenZipStartOK(buf[at:]) || m.format == FormatRar && rarStartOK(buf[at:]) {
				return Detection{Format: m.format, Offset: int64(at), SFX: true}
			}
			from = at + 1
		}
	}
	return Detection{SFX: true}
}

// executableStubs are the starts of the programs an archive follows as a
// self-extractor's stub: Windows ("MZ": 7-Zip's, WinRAR's), ELF (7-Zip's
// 7zCon.sfx, unzipsfx on Unix), Mach-O (thin, both byte orders, and fat),
// and a script's #! line (python -m zipapp, executable jars).
var executableStubs = [][]byte{
	[]byte("MZ"),
	[]byte("\x7fELF"),
	{0xfe, 0xed, 0xfa, 0xce}, {0xfe, 0xed, 0xfa, 0xcf},
	{0xce, 0xfa, 0xed, 0xfe}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
	[]byte("#!"),
}

// executable reports whether head starts with a program's magic
// (executableStubs).
func executable(head []byte) bool {
	for _, m := range executableStubs {
		if bytes.HasPrefix(head, m) {
			return true
		}
	}
	return false
}

// zipTailEnd reports whether the last 64 KiB of r hold a zip end of
// central directory record whose comment ends the file.
func zipTailEnd(r io.ReaderAt, size int64) bool {
	if size < zipEndLen {
		return false
	}
	tail := min(size, zipEndLen+zipMaxCommentLen)
	buf := make([]byte, tail)
	if n, _ := r.ReadAt(buf, size-tail); int64(n) < tail {
		return false
	}
	for j := len(buf) - zipEndLen; j >= 0; j-- {
		if le32(buf[j:]) == zipEndSig && j+zipEndLen+int(le16(buf[j+20:])) == len(buf) {
			return true
		}
	}
	return false
}

// sevenZipStartOK reports whether b begins with a 7z signature header
// whose checksum holds.
func sevenZipStartOK(b []byte) bool {
	return len(b) >= sz7SignatureLen && string(b[:len(sz7Signature)]) == sz7Signature &&
		crc32.ChecksumIEEE(b[12:sz7SignatureLen]) == le32(b[8:])
}

// rarStartOK reports whether b starts with a RAR signature followed by a
// whole header whose checksum matches: RAR5's first header (CRC32 of its
// size and body) or RAR4's main header (the low 16 bits of the CRC32 of
// the header from its type on). The signature alone is data some programs
// hold (7-Zip's, unrar's).
func rarStartOK(b []byte) bool {
	switch {
	case bytes.HasPrefix(b, []byte(rar5Sig)):
		h := b[len(rar5Sig):]
		if len(h) < 5 {
			return false
		}
		size, n := uvarint(h[4:])
		return n > 0 && size > 0 && size <= rar5MaxBlock && uint64(len(h)) >= 4+uint64(n)+size &&
			crc32.ChecksumIEEE(h[4:4+n+int(size)]) == le32(h)
	case bytes.HasPrefix(b, []byte(rar4Sig)):
		h := b[len(rar4Sig):]
		if len(h) < 7 || h[2] != rar4Main {
			return false
		}
		size := int(le16(h[5:]))
		if le16(h[3:])&rar4MainComment != 0 {
			size = 13 // as list4 reads it: the comment is a block of its own
		}
		return size >= 7 && len(h) >= size && uint16(crc32.ChecksumIEEE(h[2:size])) == le16(h)
	}
	return false
}

// sniffParts detects the format of the first part.
func sniffParts(src *partSet) Detection {
	if src.Len() == 0 {
		return Detection{}
	}
	r, size := src.Part(0)
	return Detect(r, size)
}
