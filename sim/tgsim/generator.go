package tgsim

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	"stashd/archive/archivetest"
	"stashd/tg"
)

// Scenario describes the chats and accounts a Generator sets up.
//
// Each source is watched by one account, round robin over the accounts, and
// only that account is a member of it: an account can therefore re-send
// (inputFileRemote) only files from the sources it watches, as on Telegram.
// Every account is a member of every destination.
type Scenario struct {
	// Seed makes everything the generator publishes reproducible.
	Seed int64
	// Sources is the number of plain sources, alternating channels and
	// supergroups. Zero means 1, unless ForumTopics adds a forum.
	Sources int
	// ForumTopics adds one forum source with this many topics; zero adds no
	// forum.
	ForumTopics int
	// Accounts is the number of accounts, named "acct1".."acctN"; zero
	// means 1. Even-numbered accounts are Premium.
	Accounts int
	// Destinations is the number of destination channels; zero means 1.
	Destinations int
	// ForumDestination adds a destination forum, without topics (stashd
	// creates those it maps source topics to), after the channels.
	ForumDestination bool
	// Repacks is the probability that a step re-posts an earlier single
	// zip or rar package's files in the other container (a repack: the
	// same paths, sizes and CRCs in other bytes). Zero never, and leaves
	// the seed's content as it was.
	Repacks float64
	// EditDocuments is the probability that a step replaces the document
	// of an earlier single archive (editMessageMedia) with a new archive.
	// Zero never, and leaves the seed's content as it was.
	EditDocuments float64
}

// SourceInfo is a source chat the generator created.
type SourceInfo struct {
	Chat  tg.ChatID
	Kind  tg.ChatKind
	Title string
	// Account is the account that watches the source (its only member).
	Account string
	// Topics are the forum's topic thread ids; nil for other kinds.
	Topics []int64
}

// Truth is what the generator published that stashd should catalogue.
type Truth struct {
	// Packages lists every package published, in publication order,
	// duplicates, corrupt and incomplete ones included.
	Packages []ExpectedPackage
}

// ExpectedPackage is one published package: a single archive, a multipart
// set or an album.
type ExpectedPackage struct {
	// Hash is the SHA-256 over the parts' bytes concatenated in set order
	// (for an incomplete set: over the parts that were posted).
	Hash [32]byte
	// Name is the file name of the package's first part.
	Name string
	// Parts are the source messages carrying the package, in set order.
	Parts []tg.MessageKey
	// Corrupt packages are mirrored but their listing is expected to fail.
	Corrupt bool
	// Incomplete sets miss a part: they are expected to end as dead letters
	// and never be delivered.
	Incomplete bool
	// VolumeMissing marks an Incomplete set that lost its last part: its
	// names look complete, only its listing says a volume follows.
	VolumeMissing bool
	// Duplicate is set when the same Hash was published earlier.
	Duplicate bool
	// Repack marks a repack of an earlier package (RepackOf, its index in
	// Truth.Packages): catalogued and linked, not delivered again.
	Repack   bool
	RepackOf int
	// Replaced marks a single archive whose document a later edit replaced
	// (Scenario.EditDocuments): mirrored only if stashd fetched it before
	// the edit, so not expected. ReplacedFiles are the unique ids its
	// message carried before the edit.
	Replaced      bool
	ReplacedFiles []string
	// Edit marks the document an edit put in place of a Replaced one, in
	// the same message: a package like any other.
	Edit bool
}

// Unique returns the distinct complete packages by hash: the first
// publication of each hash, incomplete sets left out. Corrupt packages are
// included: stashd mirrors them too.
func (t Truth) Unique() map[[32]byte]ExpectedPackage {
	out := make(map[[32]byte]ExpectedPackage)
	for _, p := range t.Packages {
		if p.Incomplete || p.Repack || p.Replaced {
			continue
		}
		if _, ok := out[p.Hash]; !ok {
			out[p.Hash] = p
		}
	}
	return out
}

// Generator publishes a reproducible stream of content into a World and
// records the Truth. All its random choices come from one PCG stream seeded
// from Scenario.Seed, so the same seed yields the same Truth. Its methods are
// safe for concurrent use but are meant to be driven from one goroutine.
type Generator struct {
	repacks   float64
	edits     float64
	mu        sync.Mutex
	w         *World
	rng       *rand.Rand
	gen       content
	accounts  []string
	sources   []SourceInfo
	dests     []tg.ChatID
	forumDest tg.ChatID

	truth  Truth
	hashes map[[32]byte]bool
	posted []postedPackage // complete packages, for duplicates
	// postedFiles are the files PostDir posted, in order.
	postedFiles []PostedFile
	names       map[tg.ChatID]map[string]bool
	deletes     []scheduledDelete
	steps       int
	seq         int
	albumSeq    int64
}

// part is one file of a package, named by its stem-relative suffix so that
// a re-upload can rename the whole set consistently.
type part struct {
	suffix string
	data   []byte
}

type postedPackage struct {
	truthIndex int
	stem       string
	parts      []part
	uids       []string
	album      bool
	source     tg.ChatID
	// format and files are a single archive's, for a repack of it.
	format string
	files  []archivetest.File
}

// Entries per generated archive: up to maxEntries, and fewer for the
// archives of an album, which has up to ten of them.
const (
	maxEntries      = 12
	maxAlbumEntries = 4
)

type scheduledDelete struct {
	step int
	key  tg.MessageKey
}

// NewGenerator creates the scenario's accounts, sources, forum topics and
// destinations in w.
func NewGenerator(w *World, sc Scenario) *Generator {
	sc.Accounts = max(sc.Accounts, 1)
	sc.Destinations = max(sc.Destinations, 1)
	if sc.Sources <= 0 && sc.ForumTopics <= 0 {
		sc.Sources = 1
	}
	rng := rand.New(rand.NewPCG(uint64(sc.Seed), 0x67656e)) // "gen"
	g := &Generator{
		repacks: sc.Repacks,
		edits:   sc.EditDocuments,
		w:       w,
		rng:     rng,
		gen:     content{rng: rng},
		hashes:  make(map[[32]byte]bool),
		names:   make(map[tg.ChatID]map[string]bool),
	}
	for i := 1; i <= sc.Accounts; i++ {
		name := fmt.Sprintf("acct%d", i)
		w.AddAccount(name, i%2 == 0)
		g.accounts = append(g.accounts, name)
	}
	for i := range sc.Sources {
		kind := tg.KindChannel
		if i%2 == 1 {
			kind = tg.KindSupergroup
		}
		g.addSource(kind, fmt.Sprintf("source %d", i+1))
	}
	if sc.ForumTopics > 0 {
		src := g.addSource(tg.KindForum, "forum")
		for t := range sc.ForumTopics {
			src.Topics = append(src.Topics, w.AddTopic(src.Chat, fmt.Sprintf("topic %d", t+1)))
		}
	}
	for i := range sc.Destinations {
		g.dests = append(g.dests, w.AddChat(tg.KindChannel, fmt.Sprintf("destination %d", i+1), g.accounts...))
	}
	if sc.ForumDestination {
		g.forumDest = w.AddChat(tg.KindForum, "destination forum", g.accounts...)
		g.dests = append(g.dests, g.forumDest)
	}
	return g
}

func (g *Generator) addSource(kind tg.ChatKind, title string) *SourceInfo {
	acct := g.accounts[len(g.sources)%len(g.accounts)]
	id := g.w.AddChat(kind, title, acct)
	g.sources = append(g.sources, SourceInfo{Chat: id, Kind: kind, Title: title, Account: acct})
	g.names[id] = make(map[string]bool)
	return &g.sources[len(g.sources)-1]
}

// Sources returns the source chats, plain sources first, then the forum.
func (g *Generator) Sources() []SourceInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]SourceInfo, len(g.sources))
	copy(out, g.sources)
	return out
}

// ForumDestination returns the destination forum (Scenario.ForumDestination),
// or 0.
func (g *Generator) ForumDestination() tg.ChatID { return g.forumDest }

// Destinations returns the destination chats: the channels, then the
// forum if there is one.
func (g *Generator) Destinations() []tg.ChatID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]tg.ChatID(nil), g.dests...)
}

// Accounts returns the account names.
func (g *Generator) Accounts() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.accounts...)
}

// Truth returns what has been published so far.
func (g *Generator) Truth() Truth {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Truth{Packages: append([]ExpectedPackage(nil), g.truth.Packages...)}
}

// Step publishes the next item into some source (and first deletes the
// messages scheduled for deletion by now). An item is one of: a single
// archive, a multipart set, an album, a cross-channel duplicate (a forward:
// same unique ids), a re-upload (same bytes, new unique ids, new name), a
// corrupt archive, an incomplete multipart set, a non-archive document, a
// text message, a non-package message that a later step deletes, a hostile
// archive (names PostgreSQL cannot store, bidi overrides, a symlink out of
// the root, encryption, a lying extension), a multipart set with one part
// posted twice, or a set that lost its last volume.
// Deletions only ever hit messages that carry no package, so Truth stays
// exact.
func (g *Generator) Step() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.steps++
	g.runDeletes()
	if g.repacks > 0 && g.rng.Float64() < g.repacks && g.repack() {
		return
	}
	if g.edits > 0 && g.rng.Float64() < g.edits && g.editDocument() {
		return
	}
	items := []struct {
		weight int
		fn     func(src *SourceInfo, thread int64)
	}{
		{34, g.single},
		{12, g.multipart},
		{10, g.album},
		{8, g.crossDuplicate},
		{6, g.reupload},
		{7, g.corrupt},
		{5, g.incomplete},
		{8, g.nonArchive},
		{6, g.textMessage},
		{4, g.deletedLater},
		{4, g.hostile},
		{3, g.duplicatePart},
		{2, g.volumeMissing},
	}
	total := 0
	for _, it := range items {
		total += it.weight
	}
	r := g.rng.IntN(total)
	src, thread := g.place()
	for _, it := range items {
		if r < it.weight {
			it.fn(src, thread)
			return
		}
		r -= it.weight
	}
}

// place picks a source and, in a forum, a topic (or the General topic, 0).
func (g *Generator) place() (*SourceInfo, int64) {
	src := &g.sources[g.rng.IntN(len(g.sources))]
	if len(src.Topics) == 0 || g.rng.IntN(5) == 0 {
		return src, 0
	}
	return src, pick(g.rng, src.Topics)
}

func (g *Generator) nextStem() string {
	g.seq++
	return g.gen.packageStem(g.seq)
}

func (g *Generator) nextAlbum() int64 {
	g.albumSeq++
	return 13_000_000_000_000_000 + g.albumSeq
}

func (g *Generator) single(src *SourceInfo, thread int64) {
	format := pick(g.rng, archiveFormats())
	files := g.gen.listing(maxEntries)
	data := buildArchive(format, files)
	g.publish(src, thread, g.nextStem(), []part{{suffix: "." + format, data: data}}, 0, pkgFlags{})
	if last := &g.posted[len(g.posted)-1]; format == fmtZip || format == fmtRar {
		last.format, last.files = format, files
	}
}

// repack re-posts the files of an earlier single zip (rar) package as a
// rar (zip) under a new name, in a source of its own choosing, and records
// it as a repack. It reports false when there is no package to repack.
func (g *Generator) repack() bool {
	var cands []int
	for i, p := range g.posted {
		if p.files != nil {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return false
	}
	orig := g.posted[pick(g.rng, cands)]
	format := fmtRar
	if orig.format == fmtRar {
		format = fmtZip
	}
	src, thread := g.place()
	g.publishWith(src, thread, g.nextStem(), []part{{suffix: "." + format, data: buildArchive(format, orig.files)}}, 0,
		pkgFlags{repackOf: orig.truthIndex + 1}, nil)
	return true
}

// multipartParts builds a multipart set of up to n parts (at least 2) in
// one of the naming styles stashd groups: a zip split set name.z01 …
// name.zip, a byte split name.7z.001 … (or name.zip.001 …), or RAR volumes
// name.part1.rar ….
func (g *Generator) multipartParts(n int) []part {
	return g.multipartPartsOf(g.rng.IntN(3), n)
}

// multipartPartsOf is multipartParts in one naming style: 0 zip split, 1
// byte split, 2 RAR volumes.
func (g *Generator) multipartPartsOf(style, n int) []part {
	files := g.gen.listing(maxEntries)
	var parts []part
	switch style {
	case 0:
		vols := volumes(n, func(k int) [][]byte { return archivetest.ZipSplit(files, k) })
		for i, v := range vols {
			parts = append(parts, part{suffix: fmt.Sprintf(".z%02d", i+1), data: v})
		}
		parts[len(parts)-1].suffix = ".zip"
	case 1:
		format := fmt7z
		if g.rng.IntN(4) == 0 {
			format = fmtZip
		}
		whole := buildArchive(format, files)
		vols := volumes(n, func(k int) [][]byte { return archivetest.Split(whole, k) })
		for i, v := range vols {
			parts = append(parts, part{suffix: fmt.Sprintf(".%s.%03d", format, i+1), data: v})
		}
	default:
		vols := volumes(n, func(k int) [][]byte { return archivetest.RarVolumes(files, k) })
		for i, v := range vols {
			parts = append(parts, part{suffix: fmt.Sprintf(".part%d.rar", i+1), data: v})
		}
	}
	return parts
}

func (g *Generator) multipart(src *SourceInfo, thread int64) {
	g.publish(src, thread, g.nextStem(), g.multipartParts(2+g.rng.IntN(5)), 0, pkgFlags{})
}

// album posts 2–10 documents with one media_album_id: either independent
// archives or the parts of one multipart set. Either way it is one package.
func (g *Generator) album(src *SourceInfo, thread int64) {
	n := 2 + g.rng.IntN(9)
	var parts []part
	if g.rng.IntN(2) == 0 {
		parts = g.multipartParts(n)
	} else {
		for i := range n {
			format := pick(g.rng, archiveFormats())
			data := buildArchive(format, g.gen.listing(maxAlbumEntries))
			parts = append(parts, part{suffix: fmt.Sprintf(" (%d).%s", i+1, format), data: data})
		}
	}
	g.publish(src, thread, g.nextStem(), parts, g.nextAlbum(), pkgFlags{})
}

// crossDuplicate forwards an earlier package into a source that has not seen
// its name (a forward keeps the unique ids and names).
func (g *Generator) crossDuplicate(src *SourceInfo, thread int64) {
	if len(g.posted) == 0 {
		g.single(src, thread)
		return
	}
	orig := g.posted[g.rng.IntN(len(g.posted))]
	var targets []*SourceInfo
	for i := range g.sources {
		s := &g.sources[i]
		if s.Chat != orig.source && !g.names[s.Chat][orig.stem+orig.parts[0].suffix] {
			targets = append(targets, s)
		}
	}
	if len(targets) == 0 {
		g.reupload(src, thread)
		return
	}
	target := pick(g.rng, targets)
	thread = 0
	if len(target.Topics) > 0 {
		thread = pick(g.rng, target.Topics)
	}
	var album int64
	if orig.album {
		album = g.nextAlbum() // a forwarded album gets a new media_album_id
	}
	prev := g.truth.Packages[orig.truthIndex]
	g.publishWith(target, thread, orig.stem, orig.parts, album, pkgFlags{corrupt: prev.Corrupt}, orig.uids)
}

// reupload posts the bytes of an earlier package again under a new name:
// new unique ids, same content hash.
func (g *Generator) reupload(src *SourceInfo, thread int64) {
	if len(g.posted) == 0 {
		g.single(src, thread)
		return
	}
	orig := g.posted[g.rng.IntN(len(g.posted))]
	var album int64
	if orig.album {
		album = g.nextAlbum()
	}
	prev := g.truth.Packages[orig.truthIndex]
	g.publish(src, thread, g.nextStem(), orig.parts, album, pkgFlags{corrupt: prev.Corrupt})
}

// corrupt posts an archive-named document whose listing must fail: one of
// archivetest's damaged archives, a tar.gz cut short, or garbage.
func (g *Generator) corrupt(src *SourceInfo, thread int64) {
	var p part
	switch r := g.rng.IntN(10); {
	case r < 6:
		c := pick(g.rng, corruptions())
		p = part{suffix: c.ext, data: archivetest.Corrupt(c.kind, g.gen.listing(maxEntries))}
	case r < 8:
		data := archivetest.TarGz(g.gen.listing(maxEntries))
		p = part{suffix: ".tar.gz", data: data[:len(data)/3+g.rng.IntN(len(data)/3+1)]}
	default:
		p = part{suffix: pick(g.rng, []string{".rar", ".7z", ".zip"}), data: g.gen.randomBytes(2<<10 + g.rng.IntN(38<<10))}
	}
	g.publish(src, thread, g.nextStem(), []part{p}, 0, pkgFlags{corrupt: true})
}

// incomplete posts a multipart set with one part never posted.
func (g *Generator) incomplete(src *SourceInfo, thread int64) {
	parts := g.multipartParts(3 + g.rng.IntN(4))
	// Names reveal a missing part only when a higher-numbered part is
	// there: a set that lost its last numbered part looks like a complete
	// shorter set, which only the listing can expose. The one exception is
	// the final x.zip of a zip split set, whose absence its x.zNN parts
	// show. Incomplete must mean "incomplete by name", so a set loses its
	// final x.zip or a numbered part below the highest.
	last := len(parts) - 1
	missing := g.rng.IntN(last) // a numbered part below the highest
	if strings.HasSuffix(parts[last].suffix, ".zip") {
		// parts[last-1] is the highest x.zNN: never the one to lose.
		if missing = g.rng.IntN(last); missing == last-1 {
			missing = last
		}
	}
	parts = append(parts[:missing:missing], parts[missing+1:]...)
	g.publish(src, thread, g.nextStem(), parts, 0, pkgFlags{incomplete: true})
}

// hostile posts an archive that a listing must survive and flag: entry
// names with invalid UTF-8, NUL and a bidi override under a document name
// holding NUL, a tar with a symlink out of the root written through, an
// encrypted zip or a RAR with encrypted headers, or an archive whose
// extension names another format. None is corrupt: each lists without error.
func (g *Generator) hostile(src *SourceInfo, thread int64) {
	files := g.gen.listing(maxEntries)
	stem := g.nextStem()
	var p part
	switch g.rng.IntN(5) {
	case 0:
		files = append(files,
			archivetest.File{Name: "bad\xff\xfe name.txt", Data: []byte("invalid UTF-8")},
			archivetest.File{Name: "nul\x00.txt", Data: []byte("NUL")},
			archivetest.File{Name: "invoice\u202Etxt.exe", Data: []byte("bidi")})
		stem += "\x00"
		p = part{suffix: ".zip", data: archivetest.Zip(files)}
	case 1:
		p = part{suffix: ".tar", data: archivetest.EscapingSymlinkTar(files)}
	case 2:
		p = part{suffix: ".zip", data: archivetest.EncryptedZip(files)}
	case 3:
		p = part{suffix: ".rar", data: archivetest.RarEncryptedHeaders(byte(g.rng.IntN(256)))}
	default:
		// A RAR named .zip, a 7z named .rar, a zip named .7z.
		lies := [][2]string{{fmtRar, ".zip"}, {fmt7z, ".rar"}, {fmtZip, ".7z"}}
		l := pick(g.rng, lies)
		p = part{suffix: l[1], data: buildArchive(l[0], files)}
	}
	g.publish(src, thread, stem, []part{p}, 0, pkgFlags{})
}

// duplicatePart posts a multipart set with one of its parts forwarded
// again right after it (same unique id): a duplicate part, not a broken set.
func (g *Generator) duplicatePart(src *SourceInfo, thread int64) {
	parts := g.multipartParts(3 + g.rng.IntN(3))
	g.publish(src, thread, g.nextStem(), parts, 0, pkgFlags{dupPart: 1 + g.rng.IntN(len(parts))})
}

// volumeMissing posts a RAR (x.partN.rar) or 7z (x.7z.NNN) set without its
// last volume: complete by name, but its listing says a volume follows.
func (g *Generator) volumeMissing(src *SourceInfo, thread int64) {
	parts := g.multipartPartsOf(1+g.rng.IntN(2), 3+g.rng.IntN(3))
	if strings.Contains(parts[0].suffix, ".zip.") {
		// A byte split zip without its end lists by its local headers.
		parts = g.multipartPartsOf(2, 3+g.rng.IntN(3))
	}
	parts = parts[:len(parts)-1]
	g.publish(src, thread, g.nextStem(), parts, 0, pkgFlags{incomplete: true, volumeMissing: true})
}

func (g *Generator) nonArchive(src *SourceInfo, thread int64) {
	g.postNoise(src, thread)
}

func (g *Generator) textMessage(src *SourceInfo, thread int64) {
	g.w.Post(src.Chat, thread, Post{Text: g.gen.text()})
}

// deletedLater posts a message that carries no package and schedules its
// deletion a few steps later, leaving a hole in the server ids.
func (g *Generator) deletedLater(src *SourceInfo, thread int64) {
	var m tg.Message
	if g.rng.IntN(2) == 0 {
		m = g.w.Post(src.Chat, thread, Post{Text: g.gen.text()})
	} else {
		m = g.postNoise(src, thread)
	}
	g.deletes = append(g.deletes, scheduledDelete{step: g.steps + 1 + g.rng.IntN(5), key: m.Key()})
}

func (g *Generator) postNoise(src *SourceInfo, thread int64) tg.Message {
	name, data := g.gen.pdf()
	if g.rng.IntN(2) == 0 {
		name, data = g.gen.jpeg()
	}
	return g.w.Post(src.Chat, thread, Post{FileName: name, Data: data, Caption: g.gen.caption()})
}

func (g *Generator) runDeletes() {
	kept := g.deletes[:0]
	for _, d := range g.deletes {
		if d.step <= g.steps {
			g.w.Delete(d.key.Chat, d.key.Message)
		} else {
			kept = append(kept, d)
		}
	}
	g.deletes = kept
}

type pkgFlags struct {
	corrupt       bool
	incomplete    bool
	volumeMissing bool
	// dupPart, when not zero, forwards that part (1-based) again right
	// after it is posted.
	dupPart int
	// repackOf, when not zero, is 1 + the truth index of the package this
	// one repacks.
	repackOf int
}

// publish uploads parts as new files under stem (consecutive messages, the
// caption on the first) and records the package.
func (g *Generator) publish(src *SourceInfo, thread int64, stem string, parts []part, album int64, f pkgFlags) {
	g.publishWith(src, thread, stem, parts, album, f, nil)
}

// publishWith is publish, re-posting existing files by unique id when uids
// is set (a forward).
func (g *Generator) publishWith(src *SourceInfo, thread int64, stem string, parts []part, album int64, f pkgFlags, uids []string) {
	caption := g.gen.caption()
	h := sha256.New()
	pkg := ExpectedPackage{Name: stem + parts[0].suffix, Corrupt: f.corrupt, Incomplete: f.incomplete, VolumeMissing: f.volumeMissing,
		Repack: f.repackOf > 0, RepackOf: f.repackOf - 1}
	posted := postedPackage{truthIndex: len(g.truth.Packages), stem: stem, parts: parts, album: album != 0, source: src.Chat}
	for i, p := range parts {
		post := Post{FileName: stem + p.suffix, Data: p.data, AlbumID: album}
		if uids != nil {
			post = Post{SameFileAs: uids[i], AlbumID: album}
		}
		if i == 0 {
			post.Caption = caption
		}
		m := g.w.Post(src.Chat, thread, post)
		if f.dupPart == i+1 {
			g.w.Post(src.Chat, thread, Post{SameFileAs: m.Document.File.UniqueID})
		}
		h.Write(p.data)
		pkg.Parts = append(pkg.Parts, m.Key())
		posted.uids = append(posted.uids, m.Document.File.UniqueID)
		g.names[src.Chat][stem+p.suffix] = true
	}
	copy(pkg.Hash[:], h.Sum(nil))
	pkg.Duplicate = g.hashes[pkg.Hash]
	if !f.incomplete && f.repackOf == 0 {
		g.hashes[pkg.Hash] = true
		g.posted = append(g.posted, posted)
	}
	g.truth.Packages = append(g.truth.Packages, pkg)
}
