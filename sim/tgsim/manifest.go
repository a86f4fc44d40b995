package tgsim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/BurntSushi/toml"

	"stashd/tg"
)

// ManifestName is the file of a posted directory that gives each file's
// expected outcome (docs/hostile.md). It is never posted.
const ManifestName = "expect.toml"

// The outcomes a manifest may expect of a file.
const (
	ExpectDelivered  = "delivered"   // delivered whole, with its set's parts
	ExpectDeadLetter = "dead_letter" // a dead letter whose reason holds Reason; never delivered
	ExpectNotArchive = "not_archive" // handled as no archive; never delivered
	ExpectRejected   = "rejected"    // a copy of a part left out of its set; never delivered
	ExpectDuplicate  = "duplicate"   // the same bytes as an earlier file; never delivered again
	ExpectRepack     = "repack"      // the same entries as RepackOf in other bytes: linked, not delivered
)

// Expectation is one file's entry in the manifest.
type Expectation struct {
	// Name is the file's name in the directory.
	Name string `toml:"name"`
	// PostAs is the name it is posted under, when not Name: two copies of
	// a part cannot share a name in one directory.
	PostAs string `toml:"post_as"`
	// Expect is one of the Expect* outcomes.
	Expect string `toml:"expect"`
	// Set and Part place the file in a multipart set (the set's name, the
	// 1-based part); files of one Set are posted as one package.
	Set  string `toml:"set"`
	Part int    `toml:"part"`
	// Reason is a part of the dead letter's reason (dead_letter).
	Reason string `toml:"reason"`
	// Format is the format the catalogue must record, detected by magic.
	Format string `toml:"format"`
	// Flags the catalogue must show: name:control, name:bidi,
	// name:zero-width (the posted name), entry:bidi, entry:zero-width,
	// entry:unsafe (some entry), suspicious, name_lied.
	Flags []string `toml:"flags"`
	// RepackOf names the file whose package this one repacks.
	RepackOf string `toml:"repack_of"`
	// ContainedIn names the file whose package holds all of this one's
	// entries and more.
	ContainedIn string `toml:"contained_in"`
}

// Posted returns the name the file is posted under.
func (e Expectation) Posted() string {
	if e.PostAs != "" {
		return e.PostAs
	}
	return e.Name
}

// Manifest is a posted directory's expect.toml.
type Manifest struct {
	Files []Expectation `toml:"file"`
}

// LoadManifest reads dir's expect.toml; ok is false when there is none.
func LoadManifest(dir string) (m Manifest, ok bool, err error) {
	path := filepath.Join(dir, ManifestName)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return Manifest{}, false, nil
	}
	md, err := toml.DecodeFile(path, &m)
	if err != nil {
		return Manifest{}, false, fmt.Errorf("%s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return Manifest{}, false, fmt.Errorf("%s: unknown field %s", path, und[0])
	}
	valid := []string{ExpectDelivered, ExpectDeadLetter, ExpectNotArchive, ExpectRejected, ExpectDuplicate, ExpectRepack}
	seen := map[string]bool{}
	for _, e := range m.Files {
		if !slices.Contains(valid, e.Expect) {
			return Manifest{}, false, fmt.Errorf("%s: %q: expect %q is not one of %v", path, e.Name, e.Expect, valid)
		}
		if seen[e.Name] {
			return Manifest{}, false, fmt.Errorf("%s: %q appears twice", path, e.Name)
		}
		seen[e.Name] = true
	}
	return m, true, nil
}

// PostedFile is one file PostDir posted.
type PostedFile struct {
	// Name is the file's name in the directory, PostedAs its posted name.
	Name, PostedAs string
	// Message is the source message carrying it; UniqueID its document.
	Message  tg.MessageKey
	UniqueID string
	// Expect is its manifest entry; nil without one.
	Expect *Expectation
}

// PostedFiles returns the files PostDir posted, in posting order.
func (g *Generator) PostedFiles() []PostedFile {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.postedFiles)
}
