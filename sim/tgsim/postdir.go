package tgsim

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"stashd/archive"
	"stashd/tg"
)

// dirGroup is one package (or one non-archive file) found in a directory.
type dirGroup struct {
	archive    bool
	incomplete bool
	files      []dirFile // in set order
}

type dirFile struct {
	name   string
	parsed archive.Name
}

// PostDir posts every regular file of dir (in name order) as documents into
// the sources, round robin by package: the parts of a multipart set go to
// the same source as consecutive messages, in set order. Files are grouped
// into packages by stashd's own naming rules (archive.ParseName and
// archive.OrderParts); a set they call incomplete is recorded as Incomplete.
// Whether an archive is corrupt is not checked, so Corrupt is always false
// here. Files that are not archives are posted but not recorded.
//
// With a manifest (expect.toml, see LoadManifest) the manifest decides
// instead: files are posted in its order under their PostAs names, the
// files of one Set together; a set expected delivered is recorded with
// the parts expected delivered, one expected dead-lettered as Incomplete,
// and files expected otherwise (rejected copies, duplicates, repacks, no
// archive) are left to the manifest's judge. Files the manifest does not
// name are posted last, unrecorded.
func (g *Generator) PostDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read dir %s: %w", dir, err)
	}
	m, ok, err := LoadManifest(dir)
	if err != nil {
		return err
	}
	if ok {
		return g.postManifest(dir, entries, m)
	}
	groups := groupFiles(entries)

	g.mu.Lock()
	defer g.mu.Unlock()
	for i, grp := range groups {
		src := &g.sources[i%len(g.sources)]
		h := sha256.New()
		pkg := ExpectedPackage{Name: grp.files[0].name, Incomplete: grp.incomplete}
		for _, f := range grp.files {
			data, err := os.ReadFile(filepath.Join(dir, f.name))
			if err != nil {
				return fmt.Errorf("read %s: %w", f.name, err)
			}
			m := g.w.Post(src.Chat, 0, Post{FileName: f.name, Data: data})
			h.Write(data)
			pkg.Parts = append(pkg.Parts, m.Key())
		}
		if !grp.archive {
			continue
		}
		copy(pkg.Hash[:], h.Sum(nil))
		pkg.Duplicate = g.hashes[pkg.Hash]
		if !pkg.Incomplete {
			g.hashes[pkg.Hash] = true
		}
		g.truth.Packages = append(g.truth.Packages, pkg)
	}
	return nil
}

// postManifest posts dir's files as its manifest says.
func (g *Generator) postManifest(dir string, entries []os.DirEntry, m Manifest) error {
	type group struct {
		files []*Expectation
	}
	var groups []*group
	bySet := map[string]*group{}
	named := map[string]bool{ManifestName: true}
	for i := range m.Files {
		e := &m.Files[i]
		named[e.Name] = true
		if e.Set == "" {
			groups = append(groups, &group{files: []*Expectation{e}})
			continue
		}
		grp := bySet[e.Set]
		if grp == nil {
			grp = &group{}
			bySet[e.Set] = grp
			groups = append(groups, grp)
		}
		grp.files = append(grp.files, e)
	}
	for _, de := range entries {
		if de.Type().IsRegular() && !named[de.Name()] {
			groups = append(groups, &group{files: []*Expectation{{Name: de.Name()}}})
		}
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	truthIndex := map[string]int{} // file name → its package in the truth
	for i, grp := range groups {
		src := &g.sources[i%len(g.sources)]
		type sent struct {
			e    *Expectation
			key  tg.MessageKey
			data []byte
		}
		var out []sent
		for _, e := range grp.files {
			data, err := os.ReadFile(filepath.Join(dir, e.Name))
			if err != nil {
				return fmt.Errorf("read %s: %w", e.Name, err)
			}
			msg := g.w.Post(src.Chat, 0, Post{FileName: e.Posted(), Data: data})
			pf := PostedFile{Name: e.Name, PostedAs: e.Posted(), Message: msg.Key()}
			if msg.Document != nil {
				pf.UniqueID = msg.Document.File.UniqueID
			}
			if e.Expect != "" {
				pf.Expect = e
			}
			g.postedFiles = append(g.postedFiles, pf)
			out = append(out, sent{e, msg.Key(), data})
		}
		// What the truth records: the parts expected delivered, or the
		// parts of a set expected to be a dead letter.
		want := ExpectDelivered
		switch grp.files[0].Expect {
		case ExpectDeadLetter:
			if grp.files[0].Set == "" || !strings.Contains(grp.files[0].Reason, "missing") {
				// A broken single archive, or a set whole but damaged:
				// the manifest's judge alone. A set missing a part is
				// also an incomplete set in the truth.
				continue
			}
			want = ExpectDeadLetter
		case ExpectRepack:
			// The same content as an earlier file's package: the audit
			// counts it as a repack, and the content as delivered once
			// whichever of the two was catalogued first.
			if _, ok := truthIndex[grp.files[0].RepackOf]; ok {
				want = ExpectRepack
			}
		}
		var keep []sent
		for _, s := range out {
			if s.e.Expect == want {
				keep = append(keep, s)
			}
		}
		if len(keep) == 0 {
			continue
		}
		slices.SortStableFunc(keep, func(a, b sent) int { return cmp.Compare(a.e.Part, b.e.Part) })
		h := sha256.New()
		pkg := ExpectedPackage{Name: keep[0].e.Posted(), Incomplete: want == ExpectDeadLetter}
		for _, s := range keep {
			h.Write(s.data)
			pkg.Parts = append(pkg.Parts, s.key)
		}
		copy(pkg.Hash[:], h.Sum(nil))
		if want == ExpectRepack {
			pkg.Repack, pkg.RepackOf = true, truthIndex[grp.files[0].RepackOf]
		}
		pkg.Duplicate = g.hashes[pkg.Hash]
		if !pkg.Incomplete {
			g.hashes[pkg.Hash] = true
		}
		for _, s := range keep {
			truthIndex[s.e.Name] = len(g.truth.Packages)
		}
		g.truth.Packages = append(g.truth.Packages, pkg)
	}
	return nil
}

// groupFiles groups the regular files of a directory listing into packages,
// in the order of each package's first file name.
func groupFiles(entries []os.DirEntry) []*dirGroup {
	var files []dirFile
	sets := make(map[string]archive.Scheme)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		f := dirFile{name: e.Name(), parsed: archive.ParseName(e.Name())}
		files = append(files, f)
		if f.parsed.IsMultipart() {
			sets[f.parsed.Set] = f.parsed.Scheme
		}
	}
	slices.SortFunc(files, func(a, b dirFile) int { return cmp.Compare(a.name, b.name) })

	var groups []*dirGroup
	bySet := make(map[string]*dirGroup)
	for _, f := range files {
		key := f.parsed.Set
		if adopts(sets[f.parsed.Base], f.parsed) {
			key = f.parsed.Base // x.zip closing x.zNN parts, or x.rar opening x.rNN parts
		}
		if key == "" {
			groups = append(groups, &dirGroup{archive: f.parsed.IsArchive(), files: []dirFile{f}})
			continue
		}
		grp := bySet[key]
		if grp == nil {
			grp = &dirGroup{archive: true}
			bySet[key] = grp
			groups = append(groups, grp)
		}
		grp.files = append(grp.files, f)
	}
	for _, grp := range groups {
		if len(grp.files) < 2 && !grp.files[0].parsed.IsMultipart() {
			continue
		}
		orderSet(grp)
	}
	return groups
}

// adopts reports whether the single archive n belongs to a set of scheme
// named like it: a zip split set's final x.zip, an old-style rar set's x.rar.
func adopts(scheme archive.Scheme, n archive.Name) bool {
	if n.IsMultipart() {
		return false
	}
	return scheme == archive.SchemeZipSplit && n.Format == archive.FormatZip ||
		scheme == archive.SchemeRarOld && n.Format == archive.FormatRar
}

// orderSet puts a set's files in set order and decides completeness with
// archive.OrderParts. An incomplete set is ordered by part number, an
// adopted x.rar first and an adopted x.zip last.
func orderSet(grp *dirGroup) {
	names := make([]archive.Name, len(grp.files))
	for i, f := range grp.files {
		names[i] = f.parsed
	}
	res := archive.OrderParts(names)
	if res.Complete {
		ordered := make([]dirFile, len(res.Order))
		for i, idx := range res.Order {
			ordered[i] = grp.files[idx]
		}
		grp.files = ordered
		return
	}
	grp.incomplete = true
	rank := func(n archive.Name) int {
		switch {
		case n.IsMultipart():
			return n.Part
		case n.Format == archive.FormatRar:
			return 1 // x.rar opens an old-style set
		}
		return 1 << 30 // x.zip closes a zip split set
	}
	slices.SortStableFunc(grp.files, func(a, b dirFile) int { return cmp.Compare(rank(a.parsed), rank(b.parsed)) })
}
