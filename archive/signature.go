package archive

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
)

// ContentSignature returns a digest of what an archive holds, whatever
// the container: its files' paths, sizes and CRC-32s, sorted (directories
// left out). Two listings with the same signature hold the same files in
// other bytes: a repack (zip to 7z, recompressed, split differently). ok
// is false when some file has no recorded CRC or size, or there is none:
// then nothing can be said.
func ContentSignature(entries []Entry) (sig []byte, ok bool) {
	var lines []string
	for _, e := range entries {
		if e.Dir {
			continue
		}
		if !e.HasCRC || e.Size < 0 {
			return nil, false
		}
		var b [12]byte
		binary.LittleEndian.PutUint64(b[:], uint64(e.Size))
		binary.LittleEndian.PutUint32(b[8:], e.CRC)
		lines = append(lines, e.Path+"\x00"+string(b[:]))
	}
	if len(lines) == 0 {
		return nil, false
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\x00\x00")))
	return sum[:], true
}

// SignatureChecked reports whether the content signature of entries stands
// on their bytes: every file's CRC was checked against its data
// (Entry.CRCChecked), not only read from the archive's headers. A
// signature that is a claim may be forged: a fake archive may carry the
// listing of a real release.
func SignatureChecked(entries []Entry) bool {
	files := 0
	for _, e := range entries {
		if e.Dir {
			continue
		}
		if !e.CRCChecked {
			return false
		}
		files++
	}
	return files > 0
}
