package archivetest

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"fmt"
)

// Corruption names a way Corrupt damages an archive.
type Corruption string

// The damages Corrupt knows.
const (
	// ZipTruncated cuts a zip at 60%: the end records and directory are gone,
	// the first local headers remain.
	ZipTruncated Corruption = "zip-truncated"
	// ZipBadDirectory breaks the signature of the first central directory entry.
	ZipBadDirectory Corruption = "zip-bad-directory"
	// ZipClaimMillion replaces the end records with zip64 ones claiming
	// 1,000,000 entries; the directory itself is unchanged.
	ZipClaimMillion Corruption = "zip-claim-million"
	// ZipDirectoryOverrun makes the end record claim a directory larger than the file.
	ZipDirectoryOverrun Corruption = "zip-directory-overrun"
	// SevenZipHugeHeader makes the start header claim a 1 GiB header (its CRC kept valid).
	SevenZipHugeHeader Corruption = "7z-huge-header"
	// SevenZipBadHeaderCRC flips a byte of the 7z header.
	SevenZipBadHeaderCRC Corruption = "7z-bad-header-crc"
	// RarBadHeaderCRC flips a byte inside the first file header of a RAR5 archive.
	RarBadHeaderCRC Corruption = "rar-bad-header-crc"
	// RarTruncated cuts a RAR5 archive inside its last file's data.
	RarTruncated Corruption = "rar-truncated"
)

// Corrupt returns an archive of files damaged as kind says. It panics on an
// unknown kind or when files are too few to damage (a bug in the test).
func Corrupt(kind Corruption, files []File) []byte {
	le := binary.LittleEndian
	switch kind {
	case ZipTruncated:
		z := Zip(files)
		return z[:len(z)*6/10]
	case ZipBadDirectory:
		z := Zip(files)
		cd := int(le.Uint32(z[len(z)-22+16:]))
		must(checkSig(z, cd, 0x02014b50))
		z[cd+1] = 'X'
		return z
	case ZipClaimMillion:
		z := Zip(files)
		end := len(z) - 22
		must(checkSig(z, end, 0x06054b50))
		size, start := uint64(le.Uint32(z[end+12:])), uint64(le.Uint32(z[end+16:]))
		var buf bytes.Buffer
		buf.Write(z[:end])
		writeZipEnd(&buf, 1_000_000, size, start, uint64(end))
		return buf.Bytes()
	case ZipDirectoryOverrun:
		z := Zip(files)
		end := len(z) - 22
		must(checkSig(z, end, 0x06054b50))
		le.PutUint32(z[end+12:], 0x7fff0000)
		return z
	case SevenZipHugeHeader:
		z := SevenZip(files)
		le.PutUint64(z[20:], 1<<30)
		le.PutUint32(z[8:], crc(z[12:32]))
		return z
	case SevenZipBadHeaderCRC:
		z := SevenZip(files)
		z[len(z)-3] ^= 0xff
		return z
	case RarBadHeaderCRC:
		r := Rar(files)
		// Signature (8), main block (4-byte CRC + size + 3 fields = 8), then the file block.
		r[8+8+6] ^= 0xff
		return r
	case RarTruncated:
		r := Rar(files)
		if len(files) == 0 || len(files[len(files)-1].Data) < 2 {
			panic("archivetest: RarTruncated needs a last file with data")
		}
		// The end block is 8 bytes; cut into the last file's data.
		return r[:len(r)-8-len(files[len(files)-1].Data)/2]
	}
	panic(fmt.Sprintf("archivetest: unknown corruption %q", kind))
}

// TraversalFiles returns files whose names try to escape an extraction
// root or carry bytes a catalogue must not store raw, and one safe name
// last. zip and RAR store them as they are; tar ends a name at NUL and 7z
// stores names as UTF-16, so leave the NUL and invalid UTF-8 names out for those.
func TraversalFiles() []File {
	return []File{
		{Name: "../../etc/passwd", Data: []byte("root")},
		{Name: "/abs/path", Data: []byte("abs")},
		{Name: `C:\windows\x`, Data: []byte("drive")},
		{Name: `ok\..\..\x`, Data: []byte("backslash")},
		{Name: "a\x00b", Data: []byte("nul")},
		{Name: "ctl\x1b[31m.txt", Data: []byte("escape")},
		{Name: "bad\xff\xfe.txt", Data: []byte("utf8")},
		{Name: "safe/name.txt", Data: []byte("safe")},
	}
}

// EscapingSymlinkTar returns a tar of files followed by a symlink "up" to
// ../../etc and an entry "up/x" written through it: extracting it writes
// outside the extraction root.
func EscapingSymlinkTar(files []File) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if f.Dir {
			must(tw.WriteHeader(&tar.Header{Name: f.dirName(), Mode: 0o755, Typeflag: tar.TypeDir, ModTime: f.modTime()}))
			continue
		}
		must(tw.WriteHeader(&tar.Header{Name: f.Name, Size: int64(len(f.Data)), Mode: 0o644, Typeflag: tar.TypeReg, ModTime: f.modTime()}))
		_, err := tw.Write(f.Data)
		must(err)
	}
	must(tw.WriteHeader(&tar.Header{Name: "up", Linkname: "../../etc", Typeflag: tar.TypeSymlink}))
	must(tw.WriteHeader(&tar.Header{Name: "up/x", Size: 1, Mode: 0o644, Typeflag: tar.TypeReg}))
	_, err := tw.Write([]byte("x"))
	must(err)
	must(tw.Close())
	return buf.Bytes()
}

// EncryptedZip returns Zip(files) with every entry marked encrypted
// (general purpose flag bit 0) in both the local and central headers, as a
// zip made with a password looks to a lister that cannot decrypt it.
func EncryptedZip(files []File) []byte {
	z := Zip(files)
	for _, sig := range []string{"PK\x03\x04", "PK\x01\x02"} {
		off := 6 // flags in a local header
		if sig == "PK\x01\x02" {
			off = 8
		}
		for i := 0; ; {
			j := bytes.Index(z[i:], []byte(sig))
			if j < 0 {
				break
			}
			z[i+j+off] |= 1
			i += j + 4
		}
	}
	return z
}
