package bench

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"stashd/archive"
	"stashd/archive/archivetest"
	"stashd/ingest"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// hash measures item 3: hashing and listing a package as the pipeline does
// (ingest.HashList: a compressed tar hashed as it is read for the
// decompressor, in one read) against its limit on the same file, the slower
// of crypto/sha256 alone and decompression alone, for every format of
// incompressible data. All read the file from the page cache; each is timed
// best of five, interleaved.
func (r *runner) hash(ctx context.Context) error {
	size := 64 << 20
	if r.o.Quick {
		size = 4 << 20
	}
	dir := filepath.Join(r.o.FilesDir, "hash")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	worstSHA := math.Inf(1)
	perFormat := map[string]float64{}
	for _, f := range hashFormats {
		path := filepath.Join(dir, "data."+string(f))
		fsize := size
		if f == archive.FormatTarXz {
			// The xz encoder makes a few MB/s of incompressible data.
			fsize = size / 4
		}
		if err := writeArchive(path, f, fsize); err != nil {
			return fmt.Errorf("write %s: %w", f, err)
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		// Interleaved, best of five each: the machine is shared.
		raw, inflate, ours := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
		for range 5 {
			d, err := timed(func() error { return rawSHA256(path) })
			if err != nil {
				return err
			}
			raw = min(raw, d)
			d, err = timed(func() error { return decompress(path, f) })
			if err != nil {
				return fmt.Errorf("decompress %s: %w", f, err)
			}
			inflate = min(inflate, d)
			d, err = timed(func() error {
				_, _, listErr, err := ingest.HashList(ctx, f, []string{path}, archive.Limits{})
				return cmp.Or(err, listErr)
			})
			if err != nil {
				return fmt.Errorf("hash and list %s: %w", f, err)
			}
			ours = min(ours, d)
		}
		mb := float64(st.Size()) / 1e6
		limit := max(raw, inflate)
		l := Line{Item: ItemHash, What: fmt.Sprintf("hash+list %s %.0f MB", f, mb), Unit: "MB/s",
			Stashd: mb / ours.Seconds(), Baseline: mb / limit.Seconds(), Goal: ">= 0.8",
			Note: fmt.Sprintf("limit: slower of sha256 alone (%.0f MB/s) and %s (%.0f MB/s); %s",
				mb/raw.Seconds(), decompressWhat(f), mb/inflate.Seconds(), noteHash[f])}
		l.Ratio = l.Stashd / l.Baseline
		perFormat[string(f)] = l.Ratio
		worstSHA = min(worstSHA, raw.Seconds()/ours.Seconds())
		r.add(l)
		os.Remove(path)
	}
	r.rep.Summary.HashVsRawSHA256 = ptr(worstSHA)
	r.rep.Summary.HashVsLimit = perFormat
	return nil
}

// hashFormats are the formats the hash item measures.
var hashFormats = []archive.Format{
	archive.FormatZip, archive.Format7z, archive.FormatRar, archive.FormatTar,
	archive.FormatTarGz, archive.FormatTarXz, archive.FormatTarZst,
}

// decompress reads the file as an extractor must: a compressed tar through
// its decompressor (as the listing configures it), any other format (its
// data stored) as plain bytes.
func decompress(path string, f archive.Format) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	var r io.Reader = bufio.NewReaderSize(file, 256<<10)
	switch f {
	case archive.FormatTarGz:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		r = zr
	case archive.FormatTarXz:
		xr, err := xz.NewReader(r)
		if err != nil {
			return err
		}
		r = xr
	case archive.FormatTarZst:
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	}
	_, err = io.CopyBuffer(io.Discard, r, make([]byte, 256<<10))
	return err
}

func decompressWhat(f archive.Format) string {
	switch f {
	case archive.FormatTarGz, archive.FormatTarXz, archive.FormatTarZst:
		return "decompression alone"
	}
	return "reading the stored bytes alone"
}

func timed(fn func() error) (time.Duration, error) {
	t := time.Now()
	err := fn()
	return time.Since(t), err
}

func rawSHA256(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.CopyBuffer(sha256.New(), f, make([]byte, 256<<10))
	return err
}

// writeArchive writes an archive of format holding about size bytes of
// incompressible data in 16 files.
func writeArchive(path string, format archive.Format, size int) error {
	const files = 16
	rng := rand.NewChaCha8([32]byte{'s', 't', 'a', 's', 'h', 'd'})
	chunk := func() []byte {
		b := make([]byte, size/files)
		_, _ = rng.Read(b)
		return b
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	switch format {
	case archive.FormatZip:
		zw := zip.NewWriter(out)
		for i := range files {
			w, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("dir/file-%02d.bin", i), Method: zip.Store})
			if err != nil {
				return err
			}
			if _, err := w.Write(chunk()); err != nil {
				return err
			}
		}
		if err := zw.Close(); err != nil {
			return err
		}
	case archive.Format7z:
		var fs []archivetest.File
		for i := range files {
			fs = append(fs, archivetest.File{Name: fmt.Sprintf("dir/file-%02d.bin", i), Data: chunk()})
		}
		if _, err := out.Write(archivetest.SevenZip(fs)); err != nil {
			return err
		}
	case archive.FormatRar, archive.FormatTar, archive.FormatTarXz, archive.FormatTarZst:
		var fs []archivetest.File
		for i := range files {
			fs = append(fs, archivetest.File{Name: fmt.Sprintf("dir/file-%02d.bin", i), Data: chunk()})
		}
		build := map[archive.Format]func([]archivetest.File) []byte{
			archive.FormatRar: archivetest.Rar, archive.FormatTar: archivetest.Tar,
			archive.FormatTarXz: archivetest.TarXz, archive.FormatTarZst: archivetest.TarZst,
		}[format]
		if _, err := out.Write(build(fs)); err != nil {
			return err
		}
	case archive.FormatTarGz:
		bw := bufio.NewWriter(out)
		gz, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
		tw := tar.NewWriter(gz)
		for i := range files {
			b := chunk()
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("dir/file-%02d.bin", i), Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
				return err
			}
			if _, err := tw.Write(b); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("no writer for %s", format)
	}
	return out.Close()
}

var noteHash = map[archive.Format]string{
	archive.FormatZip: "listing reads only the central directory",
	archive.Format7z:  "listing reads only the end header",
	archive.FormatRar: "listing reads only the block headers",
	archive.FormatTar: "listing seeks from header to header",
	archive.FormatTarGz: "tar headers are spread through the stream: the bytes are hashed on one core " +
		"as they are read for the decompressor on the other, one read",
	archive.FormatTarXz:  "as tar.gz",
	archive.FormatTarZst: "as tar.gz",
}
