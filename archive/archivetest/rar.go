package archivetest

import (
	"bytes"
	"encoding/binary"
)

// RAR5 block types and flags (RARLAB's "RAR 5.0 archive format").
const (
	r5Main = 1
	r5File = 2
	r5End  = 5

	r5HasData       = 0x2
	r5DataFromPrev  = 0x8
	r5DataToNext    = 0x10
	r5ArcVolume     = 0x1
	r5ArcVolNum     = 0x2
	r5FileDir       = 0x1
	r5FileMtime     = 0x2
	r5FileCRC       = 0x4
	r5EndNotLast    = 0x1
	r5HostUnix      = 1
	r5Signature     = "Rar!\x1a\x07\x01\x00"
	r5ModeFile      = 0o100644
	r5ModeDirectory = 0o040755
)

// Rar returns a RAR5 archive of files, stored (no compression).
// rardecode/v2 and 7-Zip read it.
func Rar(files []File) []byte { return RarVolumes(files, 1)[0] }

// RarVolumes returns a RAR5 multi-volume set of exactly n volumes (n below
// 1 counts as 1), in order, named by the caller x.part1.rar … x.partN.rar.
// File data is spread evenly over the volumes, so files straddle volume
// boundaries as they do in real sets; a volume may end up holding no file
// data when there is less data than volumes.
func RarVolumes(files []File, n int) [][]byte {
	n = max(n, 1)
	total := 0
	for _, f := range files {
		if !f.Dir {
			total += len(f.Data)
		}
	}
	capacity := max((total+n-1)/n, 1) // file data bytes per volume

	var vols [][]byte
	var cur bytes.Buffer
	room := capacity
	start := func() {
		cur.Reset()
		cur.WriteString(r5Signature)
		flags := uint64(0)
		var fields []byte
		if n > 1 {
			flags = r5ArcVolume
			if idx := len(vols); idx > 0 {
				flags |= r5ArcVolNum
				fields = appendVint(nil, uint64(idx))
			}
		}
		writeBlock(&cur, r5Main, 0, 0, append(appendVint(nil, flags), fields...))
		room = capacity
	}
	finish := func(last bool) {
		endFlags := uint64(0)
		if !last {
			endFlags = r5EndNotLast
		}
		writeBlock(&cur, r5End, 0, 0, appendVint(nil, endFlags))
		vols = append(vols, bytes.Clone(cur.Bytes()))
	}

	start()
	for _, f := range files {
		if f.Dir || len(f.Data) == 0 {
			writeRarFile(&cur, f, nil, 0, 0)
			continue
		}
		data := f.Data
		first := true
		for {
			if room == 0 && len(vols) < n-1 {
				finish(false)
				start()
			}
			chunk := data
			if len(vols) < n-1 && len(chunk) > room {
				chunk = chunk[:room]
			}
			data = data[len(chunk):]
			last := len(data) == 0
			var hflags uint64 = r5HasData
			if !first {
				hflags |= r5DataFromPrev
			}
			if !last {
				hflags |= r5DataToNext
			}
			// The CRC field of a part before the last covers that part's packed
			// data; the last part's covers the whole file (RAR 5.0 format, "Data CRC32").
			sum := crc(chunk)
			if last {
				sum = crc(f.Data)
			}
			writeRarFile(&cur, f, chunk, hflags, sum)
			room -= len(chunk)
			first = false
			if last {
				break
			}
		}
	}
	for len(vols) < n-1 {
		finish(false)
		start()
	}
	finish(true)
	return vols
}

// writeRarFile writes one file block: its header, then its data chunk. sum is
// the data CRC, stored for files (not directories).
func writeRarFile(w *bytes.Buffer, f File, chunk []byte, hflags uint64, sum uint32) {
	fileFlags, mode, size := uint64(r5FileMtime|r5FileCRC), uint64(r5ModeFile), uint64(len(f.Data))
	name := []byte(f.Name)
	if f.Dir {
		fileFlags, mode, size = r5FileMtime|r5FileDir, r5ModeDirectory, 0
		name = bytes.TrimSuffix(name, []byte("/"))
	}
	var b []byte
	b = appendVint(b, fileFlags)
	b = appendVint(b, size) // unpacked size of the whole file, in every part
	b = appendVint(b, mode)
	b = binary.LittleEndian.AppendUint32(b, uint32(f.modTime().Unix()))
	if !f.Dir {
		b = binary.LittleEndian.AppendUint32(b, sum)
	}
	b = appendVint(b, 0) // compression: version 0, method 0 (store), smallest dictionary
	b = appendVint(b, r5HostUnix)
	b = appendVint(b, uint64(len(name)))
	b = append(b, name...)
	writeBlock(w, r5File, hflags, uint64(len(chunk)), b)
	w.Write(chunk)
}

// writeBlock writes a RAR5 block header: CRC32, header size, type, flags,
// [data size], fields. The CRC covers everything after itself.
func writeBlock(w *bytes.Buffer, typ, flags, dataSize uint64, fields []byte) {
	var body []byte
	body = appendVint(body, typ)
	if dataSize > 0 {
		flags |= r5HasData
	}
	body = appendVint(body, flags)
	if flags&r5HasData != 0 {
		body = appendVint(body, dataSize)
	}
	body = append(body, fields...)
	h := appendVint(nil, uint64(len(body)))
	h = append(h, body...)
	w.Write(binary.LittleEndian.AppendUint32(nil, crc(h)))
	w.Write(h)
}

// appendVint appends a RAR5 vint: 7 bits per byte, low first, high bit = more.
func appendVint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// RarEncryptedHeaders returns what `rar a -hp` writes, cut to its start: the
// RAR5 signature, an archive encryption header (AES-256, password check
// present) and encrypted bytes where the headers follow. Without the
// password not even the names can be read.
func RarEncryptedHeaders(seed byte) []byte {
	const r5Encryption = 4
	var b bytes.Buffer
	b.WriteString(r5Signature)
	fields := appendVint(nil, 0) // encryption version: AES-256
	fields = appendVint(fields, 1)
	fields = append(fields, 15) // KDF count, log2
	for i := range 16 + 12 {    // salt, password check value
		fields = append(fields, seed+byte(i)*31)
	}
	writeBlock(&b, r5Encryption, 0, 0, fields)
	for i := range 256 { // the encrypted main header and the rest
		b.WriteByte(seed ^ byte(i*131))
	}
	return b.Bytes()
}
