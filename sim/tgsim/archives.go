package tgsim

import (
	"slices"

	"stashd/archive/archivetest"
)

// Archive formats the generator publishes as single archives, with the file
// name extension each gets.
const (
	fmtZip   = "zip"
	fmtTar   = "tar"
	fmtTarGz = "tar.gz"
	fmt7z    = "7z"
	fmtRar   = "rar"
)

func archiveFormats() []string { return []string{fmtZip, fmtTar, fmtTarGz, fmt7z, fmtRar} }

// buildArchive returns an archive of format holding files. The builders are
// archivetest's: deterministic bytes that stashd's own listing reads.
func buildArchive(format string, files []archivetest.File) []byte {
	switch format {
	case fmtZip:
		return archivetest.Zip(files)
	case fmtTar:
		return archivetest.Tar(files)
	case fmtTarGz:
		return archivetest.TarGz(files)
	case fmt7z:
		return archivetest.SevenZip(files)
	case fmtRar:
		return archivetest.Rar(files)
	}
	panic("tgsim: unknown archive format " + format)
}

// volumes returns build(files, k) for the largest k <= n (and >= 2) whose
// parts are all non-empty: Telegram refuses empty files, and a volume can
// come out empty when there is little data for many volumes.
func volumes(n int, build func(k int) [][]byte) [][]byte {
	for k := n; k > 2; k-- {
		parts := build(k)
		if !slices.ContainsFunc(parts, func(p []byte) bool { return len(p) == 0 }) {
			return parts
		}
	}
	return build(2)
}

// corruptions are the damages the generator publishes, with the extension
// the damaged archive is named with. Every one makes stashd's listing fail.
func corruptions() []struct {
	kind archivetest.Corruption
	ext  string
} {
	return []struct {
		kind archivetest.Corruption
		ext  string
	}{
		{archivetest.ZipTruncated, ".zip"},
		{archivetest.ZipBadDirectory, ".zip"},
		{archivetest.ZipDirectoryOverrun, ".zip"},
		{archivetest.SevenZipBadHeaderCRC, ".7z"},
		{archivetest.SevenZipHugeHeader, ".7z"},
		{archivetest.RarBadHeaderCRC, ".rar"},
		{archivetest.RarTruncated, ".rar"},
	}
}
