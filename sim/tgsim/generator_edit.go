package tgsim

import (
	"crypto/sha256"
	"slices"

	"stashd/tg"
)

// editDocument replaces the document of an earlier single archive (not an
// album, not a set) with a new archive, as a channel administrator's
// editMessageMedia does, and records both: the old publication as
// Replaced, the new document as a package of its own (Edit). It reports
// false when there is nothing to edit.
func (g *Generator) editDocument() bool {
	var cands []int
	for i, p := range g.posted {
		if len(p.parts) == 1 && !p.album {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return false
	}
	i := cands[g.rng.IntN(len(cands))]
	p := g.posted[i]
	// Off the list: an edited message is not edited again, forwarded or
	// repacked as if it still carried its first file.
	g.posted = slices.Delete(g.posted, i, i+1)
	old := &g.truth.Packages[p.truthIndex]
	key := old.Parts[0]

	format := pick(g.rng, archiveFormats())
	data := buildArchive(format, g.gen.listing(maxEntries))
	name := g.nextStem() + "." + format
	g.w.EditMessageMedia(key.Chat, key.Message, Post{FileName: name, Data: data, Caption: g.gen.caption()})
	g.names[key.Chat][name] = true
	old.Replaced, old.ReplacedFiles = true, slices.Clone(p.uids)

	pkg := ExpectedPackage{Name: name, Parts: []tg.MessageKey{key}, Edit: true}
	pkg.Hash = sha256.Sum256(data)
	pkg.Duplicate = g.hashes[pkg.Hash]
	g.hashes[pkg.Hash] = true
	g.truth.Packages = append(g.truth.Packages, pkg)
	return true
}
