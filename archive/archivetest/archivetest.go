// Package archivetest builds small, valid archives in memory for tests and
// for the Telegram simulator: zip (single and split sets), tar and its
// compressed forms, 7z (stored) and RAR5 (stored, single and multi-volume),
// plus deliberately damaged archives. Builders are deterministic: the same
// files give the same bytes, and different files give different bytes.
//
// It owns only the construction of test bytes; it must not read or write
// files, and package archive must not depend on it outside tests.
//
// Builders panic when the files cannot be written in the format (for
// example a tar name with a NUL byte): that is a bug in the caller's test
// data, not a condition to handle.
package archivetest

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

// File is one entry to put in an archive.
type File struct {
	// Name is the stored name, '/'-separated. A directory's trailing '/' is optional.
	Name string
	// Data is the content; nil or empty for an empty file or a directory.
	Data []byte
	// Dir makes the entry a directory (Data is ignored).
	Dir bool
	// ModTime is the modification time; the zero value means
	// 2024-01-02 03:04:05 UTC, so that builds are reproducible.
	ModTime time.Time
}

func (f File) modTime() time.Time {
	if f.ModTime.IsZero() {
		return time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	return f.ModTime
}

// dirName returns the name with exactly one trailing '/' for a directory.
func (f File) dirName() string {
	if f.Dir {
		return strings.TrimSuffix(f.Name, "/") + "/"
	}
	return f.Name
}

func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("archivetest: %v", err))
	}
}

// deflaters and gzippers keep compressors at the fastest level for reuse:
// a new one allocates and clears about a megabyte of state, which was most
// of the cost of building the simulators' archives. Reset makes a reused
// one write what a new one would.
var (
	deflaters = sync.Pool{New: func() any {
		fw, err := flate.NewWriter(nil, flate.BestSpeed)
		must(err)
		return fw
	}}
	gzippers = sync.Pool{New: func() any {
		zw, err := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		must(err)
		return zw
	}}
)

// deflater is a pooled flate writer that goes back to the pool on Close.
type deflater struct{ *flate.Writer }

func (d deflater) Close() error {
	err := d.Writer.Close()
	deflaters.Put(d.Writer)
	return err
}

// Zip returns a zip archive of files, deflated at the fastest level.
func Zip(files []File) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		fw := deflaters.Get().(*flate.Writer)
		fw.Reset(w)
		return deflater{fw}, nil
	})
	for _, f := range files {
		h := &zip.FileHeader{Name: f.dirName(), Method: zip.Deflate, Modified: f.modTime()}
		if f.Dir {
			h.Method = zip.Store
			h.SetMode(0o755 | 1<<31) // fs.ModeDir
		} else {
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		must(err)
		if !f.Dir {
			_, err = w.Write(f.Data)
			must(err)
		}
	}
	must(zw.Close())
	return buf.Bytes()
}

// Tar returns a tar archive of files (USTAR, PAX or GNU as names need).
func Tar(files []File) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.dirName(), ModTime: f.modTime(), Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(f.Data))}
		if f.Dir {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		must(tw.WriteHeader(h))
		if !f.Dir {
			_, err := tw.Write(f.Data)
			must(err)
		}
	}
	must(tw.Close())
	return buf.Bytes()
}

// TarGz returns a gzip-compressed tar of files.
func TarGz(files []File) []byte {
	var buf bytes.Buffer
	zw := gzippers.Get().(*gzip.Writer)
	zw.Reset(&buf)
	_, err := zw.Write(Tar(files))
	must(err)
	must(zw.Close())
	gzippers.Put(zw)
	return buf.Bytes()
}

// TarXz returns an xz-compressed tar of files.
func TarXz(files []File) []byte {
	var buf bytes.Buffer
	xw, err := xz.NewWriter(&buf)
	must(err)
	_, err = xw.Write(Tar(files))
	must(err)
	must(xw.Close())
	return buf.Bytes()
}

// TarZst returns a zstd-compressed tar of files.
func TarZst(files []File) []byte {
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	must(err)
	_, err = zw.Write(Tar(files))
	must(err)
	must(zw.Close())
	return buf.Bytes()
}

// TarLz4 is Tar compressed as one LZ4 frame.
func TarLz4(files []File) []byte {
	var buf bytes.Buffer
	zw := lz4.NewWriter(&buf)
	_, err := zw.Write(Tar(files))
	must(err)
	must(zw.Close())
	return buf.Bytes()
}

// Split cuts data into exactly n volumes of near-equal size, in order, as
// 7-Zip's x.7z.001 … or a generic x.zip.001 … split does: their plain
// concatenation is data. n below 1 counts as 1; when n exceeds len(data)
// some volumes are empty.
func Split(data []byte, n int) [][]byte {
	n = max(n, 1)
	out := make([][]byte, n)
	for i := range n {
		out[i] = data[i*len(data)/n : (i+1)*len(data)/n]
	}
	return out
}

// ZipSplit returns a zip split ("spanned") set of n parts, in order: the
// x.z01 … x.z(n-1) parts, then the final x.zip holding the central
// directory. Offsets and disk numbers are per part, as PKZIP and Info-ZIP
// write them. n below 2 returns the single zip.
func ZipSplit(files []File, n int) [][]byte {
	z := Zip(files)
	if n < 2 {
		return [][]byte{z}
	}
	end := len(z) - 22 // archive/zip writes no comment and, for small sets, no zip64 records
	must(checkSig(z, end, 0x06054b50))
	cdSize := int(binary.LittleEndian.Uint32(z[end+12:]))
	cdStart := int(binary.LittleEndian.Uint32(z[end+16:]))
	entries := int(binary.LittleEndian.Uint16(z[end+10:]))

	// The data region (local headers and file data) behind the split
	// signature, cut into n-1 disks; the last disk holds the directory.
	// Headers are never cut, as PKZIP and Info-ZIP keep them whole.
	body := append([]byte("PK\x07\x08"), z[:cdStart]...)
	var headers [][2]int // [start, end) of every local header and data descriptor in body
	for p, i := cdStart, 0; i < entries; i++ {
		must(checkSig(z, p, 0x02014b50))
		local := int(binary.LittleEndian.Uint32(z[p+42:])) + 4
		csize := int(binary.LittleEndian.Uint32(z[p+20:]))
		hlen := 30 + int(binary.LittleEndian.Uint16(body[local+26:])) + int(binary.LittleEndian.Uint16(body[local+28:]))
		headers = append(headers, [2]int{local, local + hlen})
		if binary.LittleEndian.Uint16(body[local+6:])&0x8 != 0 {
			desc := local + hlen + csize
			headers = append(headers, [2]int{desc, desc + 16})
		}
		p += 46 + int(binary.LittleEndian.Uint16(z[p+28:])) + int(binary.LittleEndian.Uint16(z[p+30:])) + int(binary.LittleEndian.Uint16(z[p+32:]))
	}
	starts := make([]int, n) // starts[d] is where disk d begins in body; starts[n-1] = len(body)
	starts[n-1] = len(body)
	for d := 1; d < n-1; d++ {
		c := max(d*len(body)/(n-1), starts[d-1])
		for _, h := range headers {
			if c > h[0] && c < h[1] {
				c = h[0]
			}
		}
		starts[d] = max(c, starts[d-1])
	}
	disks := make([][]byte, n-1)
	for d := range n - 1 {
		disks[d] = body[starts[d]:starts[d+1]]
	}
	diskOf := func(abs int) (int, int) {
		d := 0
		for d+1 < n-1 && abs >= starts[d+1] {
			d++
		}
		return d, abs - starts[d]
	}

	cd := bytes.Clone(z[cdStart : cdStart+cdSize])
	for p, i := 0, 0; i < entries; i++ {
		must(checkSig(cd, p, 0x02014b50))
		local := int(binary.LittleEndian.Uint32(cd[p+42:])) + 4 // +4: the split signature
		d, off := diskOf(local)
		binary.LittleEndian.PutUint16(cd[p+34:], uint16(d))
		binary.LittleEndian.PutUint32(cd[p+42:], uint32(off))
		p += 46 + int(binary.LittleEndian.Uint16(cd[p+28:])) + int(binary.LittleEndian.Uint16(cd[p+30:])) + int(binary.LittleEndian.Uint16(cd[p+32:]))
	}
	eocd := bytes.Clone(z[end:])
	binary.LittleEndian.PutUint16(eocd[4:], uint16(n-1)) // this disk
	binary.LittleEndian.PutUint16(eocd[6:], uint16(n-1)) // disk where the directory starts
	binary.LittleEndian.PutUint32(eocd[16:], 0)          // directory offset on that disk

	out := make([][]byte, 0, n)
	for _, d := range disks {
		out = append(out, bytes.Clone(d))
	}
	return append(out, append(cd, eocd...))
}

func checkSig(b []byte, at int, sig uint32) error {
	if at < 0 || at+4 > len(b) || binary.LittleEndian.Uint32(b[at:]) != sig {
		return fmt.Errorf("zip record %#x not found at %d", sig, at)
	}
	return nil
}

// ZipMany streams to w a zip of n empty stored files, with zip64 end
// records when n needs them, keeping O(1) memory whatever n. name appends
// the name of file i to buf and returns it (strconv.AppendInt style), so
// that a million names cost no allocation. It is how tests build a real
// million-entry zip without holding it.
func ZipMany(w io.Writer, n int, name func(buf []byte, i int) []byte) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var off uint64
	var hdr [46]byte
	le := binary.LittleEndian
	dosTime, dosDate := uint16(0), uint16((2024-1980)<<9|1<<5|2)
	var nm []byte
	for i := range n {
		nm = name(nm[:0], i)
		le.PutUint32(hdr[0:], 0x04034b50)
		le.PutUint16(hdr[4:], 20)
		le.PutUint16(hdr[6:], 0x800)
		le.PutUint16(hdr[8:], 0) // stored
		le.PutUint16(hdr[10:], dosTime)
		le.PutUint16(hdr[12:], dosDate)
		clear(hdr[14:26]) // crc, sizes: an empty file
		le.PutUint16(hdr[26:], uint16(len(nm)))
		le.PutUint16(hdr[28:], 0)
		bw.Write(hdr[:30])
		bw.Write(nm)
		off += uint64(30 + len(nm))
	}
	cdStart := off
	var local uint64
	for i := range n {
		nm = name(nm[:0], i)
		le.PutUint32(hdr[0:], 0x02014b50)
		le.PutUint16(hdr[4:], 3<<8|20) // made by Unix
		le.PutUint16(hdr[6:], 20)
		le.PutUint16(hdr[8:], 0x800)
		le.PutUint16(hdr[10:], 0)
		le.PutUint16(hdr[12:], dosTime)
		le.PutUint16(hdr[14:], dosDate)
		clear(hdr[16:28])
		le.PutUint16(hdr[28:], uint16(len(nm)))
		clear(hdr[30:38])
		le.PutUint32(hdr[38:], 0o100644<<16)
		le.PutUint32(hdr[42:], uint32(min(local, 0xffffffff)))
		if local >= 0xffffffff {
			return fmt.Errorf("zip of %d entries needs zip64 local offsets, not written by ZipMany", n)
		}
		bw.Write(hdr[:46])
		bw.Write(nm)
		local += uint64(30 + len(nm))
		off += uint64(46 + len(nm))
	}
	writeZipEnd(bw, uint64(n), off-cdStart, cdStart, off)
	return bw.Flush()
}

// writeZipEnd writes the end records of a zip whose directory of entries
// records and size bytes starts at cdStart and ends at endPos, adding zip64
// records when a field does not fit the classic one.
func writeZipEnd(w io.Writer, entries, size, cdStart, endPos uint64) {
	le := binary.LittleEndian
	if entries >= 0xffff || size >= 0xffffffff || cdStart >= 0xffffffff {
		var z [56 + 20]byte
		le.PutUint32(z[0:], 0x06064b50)
		le.PutUint64(z[4:], 44)
		le.PutUint16(z[12:], 45)
		le.PutUint16(z[14:], 45)
		le.PutUint64(z[24:], entries)
		le.PutUint64(z[32:], entries)
		le.PutUint64(z[40:], size)
		le.PutUint64(z[48:], cdStart)
		le.PutUint32(z[56:], 0x07064b50)
		le.PutUint64(z[64:], endPos)
		le.PutUint32(z[72:], 1)
		w.Write(z[:])
		entries, size, cdStart = 0xffff, 0xffffffff, 0xffffffff
	}
	var e [22]byte
	le.PutUint32(e[0:], 0x06054b50)
	le.PutUint16(e[8:], uint16(entries))
	le.PutUint16(e[10:], uint16(entries))
	le.PutUint32(e[12:], uint32(size))
	le.PutUint32(e[16:], uint32(cdStart))
	w.Write(e[:])
}

// crc is the CRC-32 (IEEE) that zip, 7z and RAR all use.
func crc(b []byte) uint32 { return crc32.ChecksumIEEE(b) }
