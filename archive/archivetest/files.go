package archivetest

import (
	"fmt"
	"math/rand/v2"
)

// Files returns n files derived from seed: a directory, then files with
// varied names, sizes (0 to 4 KiB) and pseudo-random (incompressible)
// content. The same seed gives the same files; different seeds give
// different names and bytes, so archives built from them differ too. n
// below 1 gives just the directory.
func Files(seed uint64, n int) []File {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	dir := fmt.Sprintf("set-%016x", seed)
	files := []File{{Name: dir, Dir: true}}
	exts := [...]string{"jpg", "pdf", "txt", "mp3", "bin", "epub"}
	for i := range n {
		data := make([]byte, rng.IntN(4097))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		name := fmt.Sprintf("%s/%03d-%x.%s", dir, i+1, rng.Uint32(), exts[rng.IntN(len(exts))])
		files = append(files, File{Name: name, Data: data})
	}
	return files
}
