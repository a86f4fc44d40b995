package tgsim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"stashd/archive/archivetest"
)

// content draws realistic-looking names, listings and file bytes from the
// generator's seeded random stream. Everything it returns depends only on
// that stream.
type content struct {
	rng *rand.Rand
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// packageStem returns a package name without extension. seq makes it unique
// within the generator, so two sets never share part names in one chat.
func (c content) packageStem(seq int) string {
	first := []string{"Project Alpha", "holiday_photos_2023", "backup", "Сборник", "music collection vol.3",
		"scans", "design-assets", "Lecture notes", "dataset", "game_mods", "résumé pack", "firmware"}
	second := []string{"final", "2024-01-15", "v2", "full", "part A", "raw", "export", "old"}
	return fmt.Sprintf("%s %s-%03d", pick(c.rng, first), pick(c.rng, second), seq)
}

// listing returns 1..maxEntries entries in nested directories with varied
// names and sizes from 1 KiB to 200 KiB (most of them small).
func (c content) listing(maxEntries int) []archivetest.File {
	dirs := []string{"", "src/", "docs/", "assets/images/", "data/2023/", "lib/", "notes/", "Фото/", "music/album 1/", "a/b/c/d/"}
	bases := []string{"readme", "report", "invoice", "track01", "main", "index", "photo_0042", "setup", "manual",
		"Отчёт", "résumé", "notes 2024", "config", "LICENSE", "data-export"}
	exts := []string{".txt", ".md", ".jpg", ".png", ".pdf", ".go", ".csv", ".json", ".mp3", ".dat", ".html", ""}
	n := 1 + c.rng.IntN(maxEntries)
	// Some tools store directory entries, others do not.
	withDirs := c.rng.IntN(2) == 0
	used := make(map[string]bool, n)
	files := make([]archivetest.File, 0, n)
	for added := 0; added < n; {
		dir := pick(c.rng, dirs)
		name := dir + pick(c.rng, bases) + pick(c.rng, exts)
		if used[name] {
			continue
		}
		used[name] = true
		if withDirs && dir != "" && !used[dir] {
			used[dir] = true
			files = append(files, archivetest.File{Name: dir, Dir: true})
		}
		files = append(files, archivetest.File{Name: name, Data: c.fileBytes(name, c.size())})
		added++
	}
	return files
}

// size returns a size between 1 KiB and 200 KiB, skewed toward small ones
// (the exponent is cubed: the mean is about 13 KiB) so that generated worlds
// stay small in memory and cheap to build, while listings still show the
// whole range.
func (c content) size() int {
	const lo, hi = 1 << 10, 200 << 10
	u := c.rng.Float64()
	return int(float64(lo) * math.Pow(float64(hi)/float64(lo), u*u*u))
}

// fileBytes returns size bytes that are unique to this draw (a random header)
// but compress well (a repeated random pattern), so archives stay small in
// memory while their listings show realistic sizes.
func (c content) fileBytes(name string, size int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %016x%016x\n", name, c.rng.Uint64(), c.rng.Uint64())
	pattern := make([]byte, 64)
	for i := range pattern {
		pattern[i] = byte('a' + c.rng.IntN(26))
	}
	out := make([]byte, 0, size)
	out = append(out, b.String()...)
	for len(out) < size {
		out = append(out, pattern...)
	}
	return out[:size]
}

// randomBytes returns n incompressible bytes.
func (c content) randomBytes(n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(c.rng.Uint32())
	}
	return out
}

// pdf returns a small document that starts like a PDF.
func (c content) pdf() (string, []byte) {
	name := fmt.Sprintf("%s_%04d.pdf", pick(c.rng, []string{"scan", "invoice", "paper", "Договор"}), c.rng.IntN(10000))
	return name, append([]byte("%PDF-1.4\n"), c.fileBytes(name, 2<<10+c.rng.IntN(30<<10))...)
}

// jpeg returns a small file that starts like a JPEG.
func (c content) jpeg() (string, []byte) {
	name := fmt.Sprintf("IMG_%04d.jpg", c.rng.IntN(10000))
	return name, append([]byte{0xFF, 0xD8, 0xFF, 0xE0}, c.randomBytes(1<<10+c.rng.IntN(20<<10))...)
}

// caption returns an optional caption with no special meaning.
func (c content) caption() string {
	if c.rng.IntN(3) == 0 {
		return ""
	}
	return pick(c.rng, []string{"New upload", "#backup", "Enjoy!", "full set, see pinned", "mirror", "обновление", "v2 fixed"})
}

// text returns a chat text message.
func (c content) text() string {
	return pick(c.rng, []string{"Hello everyone", "Next upload tomorrow", "Does anyone have part 3?",
		"Rules: no spam", "🔥🔥🔥", "Спасибо!", "link in bio"})
}
