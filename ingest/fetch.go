package ingest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"stashd/archive"
	"stashd/store"
	"stashd/tg"
)

// fetchPackage is the fetch-and-verify step for one package made of parts
// (in set order; one message for a single archive): dedup layers 2 to 5
// (unique ids known, lock and re-check, download and content hash, list).
// A package known already goes to finishDuplicate or finishPartsOf, a new
// one to catalogue.
func (p *Pipeline) fetchPackage(ctx context.Context, parts []tg.Message, format archive.Format, name string) (store.Outcome, error) {
	return p.fetchLooked(ctx, parts, format, name, nil)
}

// fetchLooked is fetchPackage with layer 2 looked up already by the
// caller, when known is not nil.
func (p *Pipeline) fetchLooked(ctx context.Context, parts []tg.Message, format archive.Format, name string, known *store.Found) (store.Outcome, error) {
	uniq := make([]string, len(parts))
	for i, m := range parts {
		uniq[i] = m.Document.File.UniqueID
	}

	// Layer 2: is every part's unique id known?
	if known == nil {
		known = &store.Found{}
		if err := p.store.Look(ctx, store.LookPackageByUniqueIDs(uniq, known)); err != nil {
			return "", fmt.Errorf("look up unique ids: %w", err)
		}
	}
	// Layer 3: lock on the unique ids, then look again: another worker,
	// account or instance may have finished this package meanwhile. The
	// looks ride with the lock's round trip.
	return p.fetchLocked(ctx, parts, format, name, known, nil)
}

// uniqueLock is dedup layer 3's lock on a package's unique ids, with what
// was read in the round trip that took it: the record of the first part's
// message, the package of all the unique ids, and a package holding some
// of them.
type uniqueLock struct {
	lock           *store.Lock
	uid            string // the unique id of a lone archive's lock (Prelock)
	handled        store.Document
	again, holding store.Found
	waits          setWaits // for a lone archive that may be a volume (lockLone)
}

// uniqueLockName is the name of layer 3's lock on unique ids uniq.
func uniqueLockName(uniq []string) string { return "u:" + strings.Join(uniq, ",") }

// reads are the looks that ride with layer 3's lock for parts.
func (u *uniqueLock) reads(parts []tg.Message, uniq []string) []store.Statement {
	return []store.Statement{store.LookMessageAndFiles(parts[0].Key(), uniq, &u.handled, &u.again, &u.holding)}
}

// loneReads are the looks that ride with layer 3's lock for msg, a lone
// archive classified as c, in its first round trip (Handle, Prelock):
// reads, and for a plain x.zip or x.rar, whether its set has begun
// (setWaits).
func (u *uniqueLock) loneReads(msg tg.Message, c classification) []store.Statement {
	uid := msg.Document.File.UniqueID
	reads := u.reads([]tg.Message{msg}, []string{uid})
	if c.maybeVolume(msg) {
		reads = append(reads, u.waits.reads(msg, c)...)
	}
	return reads
}

// lockUnique takes layer 3's lock for parts, whose unique ids are uniq.
func (p *Pipeline) lockUnique(ctx context.Context, parts []tg.Message, uniq []string) (*uniqueLock, error) {
	u := &uniqueLock{}
	return p.takeUnique(ctx, u, uniq, u.reads(parts, uniq))
}

// lockLone takes layer 3's lock for msg, a lone archive classified as c,
// with loneReads.
func (p *Pipeline) lockLone(ctx context.Context, msg tg.Message, c classification) (*uniqueLock, error) {
	u := &uniqueLock{}
	return p.takeUnique(ctx, u, []string{msg.Document.File.UniqueID}, u.loneReads(msg, c))
}

func (p *Pipeline) takeUnique(ctx context.Context, u *uniqueLock, uniq []string, reads []store.Statement) (*uniqueLock, error) {
	start := time.Now()
	lock, err := p.store.LockThen(ctx, uniqueLockName(uniq), reads...)
	p.m.observeStage(StageLock, start)
	if err != nil {
		return nil, err
	}
	u.lock = lock
	return u, nil
}

// errPlainAmongOthers is the answer for a set's parts that are not one
// archive's, a plain x.zip or x.rar among them (plainPart), until that
// one is judged alone (withPlainJudged).
var errPlainAmongOthers = errors.New("a plain archive among parts that are not one archive's")

// plainPart returns the index of the plain x.zip or x.rar among a set's
// parts (the final volume of x.z01…, the first of x.r00…, or a whole
// archive named so), -1 when there is none.
func plainPart(parts []tg.Message) int {
	for i, m := range parts {
		if c := classify(m); c.maybeVolume(m) {
			return i
		}
	}
	return -1
}

type plainJudgedKey struct{}

// withPlainJudged marks ctx's set completion as one whose plain part was
// judged alone and found no whole archive: the set is then taken as its
// parts came.
func withPlainJudged(ctx context.Context) context.Context {
	return context.WithValue(ctx, plainJudgedKey{}, true)
}

func plainJudged(ctx context.Context) bool {
	judged, _ := ctx.Value(plainJudgedKey{}).(bool)
	return judged
}

// errMayBeVolume is fetchAlone's answer for bytes that are not known to
// be a whole archive: the final x.zip of x.z01…, an x.rar whose main
// header marks it a volume, a piece of a byte split named so, an archive
// whose headers are encrypted, and a broken archive, which only the rest
// of a set, if one comes, can tell from a volume.
var errMayBeVolume = errors.New("not a whole archive: may be a volume of a set")

// fetchAlone is fetchLooked for a plain x.zip or x.rar (maybeVolume),
// whose bytes are a whole archive as a rule: it is catalogued at once, on
// the worker's download, not after SetSettle in the set sweeper. Bytes
// not known to be whole fail with errMayBeVolume, having written
// nothing, and the caller records the message as a part: the sweeper
// then takes it as it took every plain x.zip or x.rar before, its set
// whole, or it alone once SetSettle has passed, downloading it again.
func (p *Pipeline) fetchAlone(ctx context.Context, msg tg.Message, cls classification, known *store.Found, pre *uniqueLock) (store.Outcome, error) {
	return p.fetchUnder(ctx, []tg.Message{msg}, cls.name.Format, msg.Document.FileName, known, pre, true)
}

// fetchLocked is fetchLooked from layer 2 on, under pre when the caller
// took layer 3's lock already (it stays the caller's to release), else
// under a lock of its own.
func (p *Pipeline) fetchLocked(ctx context.Context, parts []tg.Message, format archive.Format, name string, known *store.Found, pre *uniqueLock) (store.Outcome, error) {
	return p.fetchUnder(ctx, parts, format, name, known, pre, false)
}

// fetchUnder is fetchLocked; alone says the parts are one message that
// may be a volume of a set (fetchAlone).
func (p *Pipeline) fetchUnder(ctx context.Context, parts []tg.Message, format archive.Format, name string, known *store.Found, pre *uniqueLock, alone bool) (store.Outcome, error) {
	uniq := make([]string, len(parts))
	for i, m := range parts {
		uniq[i] = m.Document.File.UniqueID
	}
	// Layer 2: every part's unique id is known. Only a package whose
	// deliveries are all sent or queued is settled here; otherwise the
	// locked path below queues what is missing.
	if pkg := known.ID; known.OK {
		done, err := p.store.DeliveryPromised(ctx, pkg, p.destinations(routeInput(parts)))
		if err != nil {
			return "", err
		}
		if done {
			return store.OutcomeDuplicate, p.record(ctx, parts, store.OutcomeDuplicate, pkg)
		}
	}
	u := pre
	if u == nil {
		var err error
		if u, err = p.lockUnique(ctx, parts, uniq); err != nil {
			return "", err
		}
		defer u.lock.Unlock()
	}
	lock := u.lock
	// The lock is a row renewed while held: the work under it stops if it
	// is lost. Other workers, accounts and instances wait for it, so its
	// requests do not sit out a flood wait of this account: they fail
	// with it, the lock goes, and the message's retry (Process) or the
	// set's next sweep waits the flood wait out without it.
	ctx, unbind := lock.Bind(ctx)
	defer unbind()
	ctx = tg.WithoutFloodWaits(ctx)
	if u.handled.OK && (u.handled.Outcome == store.OutcomePackage || u.handled.Outcome == store.OutcomeDuplicate) {
		return store.OutcomeDuplicate, nil
	}
	if u.again.OK {
		return p.finishDuplicate(ctx, parts, u.again.ID, nil)
	}
	// Some, not all, of a known package's files: never a package of their
	// own, which would deliver those files a second time.
	if u.holding.OK {
		return p.finishPartsOf(ctx, parts, u.holding.ID)
	}

	// Layer 4: download and hash, within the account's disk budget. The
	// local copies are deleted once hashed and listed, whatever happens
	// next: deliveries send by remote id.
	held, err := p.holdDisk(ctx, parts)
	if err != nil {
		return "", err
	}
	defer held.release()
	hashed, err := p.fetch(ctx, parts, format, held)
	if err != nil {
		return "", err
	}
	// Layer 5: list, within bounds (most formats were listed in the pass
	// that hashed them). A bad archive is still mirrored.
	var listing archive.Listing
	var listErr error
	if hashed.listed != nil {
		listing, listErr = hashed.listed.listing, hashed.listed.err
	} else {
		start := time.Now()
		listing, listErr = p.list(ctx, format, parts, hashed.paths)
		p.m.observeStage(StageList, start)
	}
	if listErr != nil && ctx.Err() != nil {
		return "", ctx.Err()
	}
	held.release()
	if !alone && format != albumFormat && errors.Is(listErr, archive.ErrNotOneArchive) && plainPart(parts) >= 0 && !plainJudged(ctx) {
		// The parts are not one archive's, and one is a plain x.zip or
		// x.rar: a whole archive of its own, maybe, that a stray volume
		// of another set named like it joined. It is judged alone first
		// (completeSet), nothing written.
		return "", errPlainAmongOthers
	}
	if alone && (listErr != nil || listing.Volume || listing.HeadersEncrypted) {
		// A volume, or bytes that cannot say whether they are whole.
		return "", errMayBeVolume
	}

	// A new package is catalogued without a lock on its content hash: the
	// catalogue's unique hash refuses it, writing nothing, when the hash
	// is catalogued already or is being catalogued meanwhile
	// (store.ErrHashTaken). Only then, and for bytes that make no package
	// of their own (why), is the hash locked and looked up: a package known
	// by its bytes is a duplicate whatever its name.
	why := p.notAPackage(format, parts, listing, listErr)
	if why == nil {
		out, err := p.catalogue(ctx, parts, format, name, uniq, hashed, listing, listErr, false, lock)
		if !errors.Is(err, store.ErrHashTaken) {
			return out, err
		}
	}
	start := time.Now()
	var byHash store.Found
	hlock, err := p.store.LockThen(ctx, "h:"+hex.EncodeToString(hashed.content), store.LookPackageByHash(hashed.content, &byHash))
	p.m.observeStage(StageLock, start)
	if err != nil {
		return "", err
	}
	defer hlock.Unlock()
	ctx, hunbind := hlock.Bind(ctx)
	defer hunbind()
	if byHash.OK {
		return p.finishDuplicate(ctx, parts, byHash.ID, uniq)
	}
	switch {
	case errors.Is(why, errNotArchive):
		return store.OutcomeNotArchive, p.record(ctx, parts, store.OutcomeNotArchive, 0)
	case why != nil:
		return "", why
	}
	// The catalogue's commit releases both locks.
	return p.catalogue(ctx, parts, format, name, uniq, hashed, listing, listErr, true, lock, hlock)
}

// errNotArchive is notAPackage's answer for bytes that are no archive.
var errNotArchive = errors.New("not an archive")

// notAPackage says why bytes listed as listing make no package of their
// own, nil when they make one: they are no archive (whatever their name
// said, errNotArchive), a volume of a set that goes on (an
// *IncompleteSetError: part names have no end marker, x.part2.rar or x.r00
// may be the last or not, so the archive itself says the set goes on; the
// sweeper dead-letters it and a late part completes it), or a broken
// archive that is dead-lettered (a *BrokenArchiveError).
func (p *Pipeline) notAPackage(format archive.Format, parts []tg.Message, listing archive.Listing, listErr error) error {
	if notArchive(format, listing) {
		return errNotArchive
	}
	if missing := volumeMissing(parts, listErr); missing != nil {
		return missing
	}
	return p.brokenArchive(listErr)
}

// list lists a package. An album's parts are independent archives, or the
// parts of multipart sets: each archive or set is listed on its own (a set
// as one archive, never part by part) and its entries are shown under the
// file name of its first part.
func (p *Pipeline) list(ctx context.Context, format archive.Format, parts []tg.Message, paths []string) (archive.Listing, error) {
	if format != albumFormat {
		return archive.List(ctx, format, paths, p.cfg.Limits)
	}
	var out archive.Listing
	var errs []error
	groups := albumGroups(parts)
	for len(groups) > 0 {
		g := groups[0]
		groups = groups[1:]
		name := parts[g[0]].Document.FileName
		groupPaths := make([]string, len(g))
		for i, idx := range g {
			groupPaths[i] = paths[idx]
		}
		l, err := archive.List(ctx, archive.ParseName(name).Format, groupPaths, p.cfg.Limits)
		if len(g) > 1 && errors.Is(err, archive.ErrNotOneArchive) {
			// Named as one set, the documents are not one archive's:
			// each is listed on its own, as the album's other archives.
			for _, idx := range g {
				groups = append(groups, []int{idx})
			}
			continue
		}
		for _, e := range l.Entries {
			out.Entries = append(out.Entries, archive.Nest(name, e, p.cfg.Limits))
		}
		out.Truncated = out.Truncated || l.Truncated
		out.Encrypted = out.Encrypted || l.Encrypted
		out.HeadersEncrypted = out.HeadersEncrypted || l.HeadersEncrypted
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return out, errors.Join(errs...)
}

// albumGroups splits an album's parts into the archives to list: the parts
// of one multipart set together in set order (an x.zip or x.rar whose name
// is the final or first part of an x.z01… or x.r00… set joins it as
// archive.OrderParts says; x.zip.001… and x.part1.rar… never take it in),
// every other archive alone. It returns indices into parts.
func albumGroups(parts []tg.Message) [][]int {
	type setName struct {
		set    string
		scheme archive.Scheme // setGroup
	}
	names := make([]archive.Name, len(parts))
	sets := map[setName][]int{}
	for i, m := range parts {
		names[i] = archive.ParseName(m.Document.FileName)
		if n := names[i]; n.IsMultipart() {
			k := setName{n.Set, setGroup(n)}
			sets[k] = append(sets[k], i)
		}
	}
	var groups [][]int
	done := make([]bool, len(parts))
	for i, n := range names {
		if done[i] {
			continue
		}
		set := setName{n.Set, setGroup(n)}
		if n.Set == "" {
			set.set = n.Base // the final x.zip or first x.rar of a set in the album
		}
		members := sets[set]
		if set.set == "" || members == nil {
			groups = append(groups, []int{i})
			done[i] = true
			continue
		}
		if n.Set == "" {
			members = append(members, i)
		} else if set.scheme == "" {
			for j, m := range names {
				if m.Set == "" && m.Base == set.set && !done[j] {
					members = append(members, j)
				}
			}
		}
		cand := make([]archive.Name, len(members))
		for k, idx := range members {
			cand[k] = names[idx]
		}
		group := members
		if o := archive.OrderParts(cand); o.Complete {
			group = make([]int, len(o.Order))
			for k, idx := range o.Order {
				group[k] = members[idx]
			}
		}
		for _, idx := range group {
			done[idx] = true
		}
		groups = append(groups, group)
	}
	return groups
}

type fetched struct {
	paths   []string
	parts   [][]byte // SHA-256 of each part
	sizes   []int64
	size    int64
	content []byte  // SHA-256 over all parts in order
	listed  *listed // the listing, when made in the same read
}

// listed is a listing and its error.
type listed struct {
	listing archive.Listing
	err     error
}

// diskHold is a package's share of the download budget and the files
// downloaded under it.
type diskHold struct {
	p     *Pipeline
	ctx   context.Context
	bytes int64
	files []int32
	done  bool
	slot  bool // holds a download slot
}

// holdDisk reserves the bytes of parts in the download budget, after a
// download slot (Config.Downloads) for a backlog's message (Backlog),
// waiting (FIFO) for each. A package larger than the whole budget
// reserves all of it, so it proceeds alone instead of never.
func (p *Pipeline) holdDisk(ctx context.Context, parts []tg.Message) (*diskHold, error) {
	var n int64
	for _, m := range parts {
		n += max(m.Document.File.Size, 0)
	}
	n = min(n, p.cfg.DownloadBudget)
	slot := inBacklog(ctx)
	if slot {
		if err := p.slots.Acquire(ctx, 1); err != nil {
			return nil, fmt.Errorf("wait for a download slot: %w", err)
		}
	}
	if err := p.disk.Acquire(ctx, n); err != nil {
		if slot {
			p.slots.Release(1)
		}
		return nil, fmt.Errorf("wait for download budget: %w", err)
	}
	p.m.addOnDisk(p.cfg.Account, n)
	return &diskHold{p: p, ctx: ctx, bytes: n, slot: slot}, nil
}

// release deletes every file downloaded under h and returns its bytes to
// the budget, and its slot. It runs once; later calls do nothing. A file that cannot be
// deleted is logged and its bytes returned anyway: holding them would stop
// the account for good.
func (h *diskHold) release() {
	if h.done {
		return
	}
	h.done = true
	p := h.p
	// Delete even when the work was cancelled: the files would stay for ever.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), 10*time.Second)
	defer cancel()
	for _, id := range h.files {
		if err := p.tg.DeleteFile(ctx, id); err != nil {
			p.log.Warn("delete downloaded file", "file", id, "err", err)
		}
	}
	p.disk.Release(h.bytes)
	if h.slot {
		p.slots.Release(1)
	}
	p.m.addOnDisk(p.cfg.Account, -h.bytes)
}

// fetch downloads every part and hashes it in one streaming pass: the part's
// own SHA-256 and the package's content hash are computed from the same
// reads, and no file is ever held in memory. Every file it starts is noted
// in held, to be deleted.
//
// A compressed tar must be read whole to be listed: its parts are
// downloaded first, then hashed and listed in one read (HashList), and
// out.listed holds the listing.
func (p *Pipeline) fetch(ctx context.Context, parts []tg.Message, format archive.Format, held *diskHold) (fetched, error) {
	if readsWholeStream(format) {
		return p.fetchListing(ctx, parts, format, held)
	}
	var out fetched
	hasher := newContentHasher(len(parts))
	for _, m := range parts {
		f, err := p.downloadPart(ctx, m, held)
		if err != nil {
			return fetched{}, err
		}
		start := time.Now()
		sum, n, err := hasher.part(f.LocalPath)
		p.m.observeStage(StageHash, start)
		if err != nil {
			return fetched{}, fmt.Errorf("hash %q: %w", m.Document.FileName, err)
		}
		out.paths = append(out.paths, f.LocalPath)
		out.parts = append(out.parts, sum)
		out.sizes = append(out.sizes, n)
		out.size += n
	}
	out.content = hasher.sum()
	return out, nil
}

// downloadPart downloads part m, noting its file in held (deleted once
// hashed, whatever happens). A download TDLib stopped, or that stalled, in
// a message deleted or edited meanwhile is the source's doing: its error
// says so (sourceGone) rather than asking for a retry.
func (p *Pipeline) downloadPart(ctx context.Context, m tg.Message, held *diskHold) (tg.File, error) {
	start := time.Now()
	held.files = append(held.files, m.Document.File.ID)
	f, err := p.download(ctx, m.Document.File)
	p.m.observeStage(StageDownload, start)
	if err != nil {
		if ctx.Err() == nil && (errors.Is(err, tg.ErrDownloadStopped) || errors.Is(err, tg.ErrDownloadStalled)) {
			if gone := p.sourceGone(ctx, m); gone != nil {
				return tg.File{}, gone
			}
		}
		return tg.File{}, fmt.Errorf("download %q: %w", m.Document.FileName, err)
	}
	return f, nil
}

// fetchListing is fetch for a compressed tar: download every part, then
// hash and list them in one read.
func (p *Pipeline) fetchListing(ctx context.Context, parts []tg.Message, format archive.Format, held *diskHold) (fetched, error) {
	var out fetched
	for _, m := range parts {
		f, err := p.downloadPart(ctx, m, held)
		if err != nil {
			return fetched{}, err
		}
		out.paths = append(out.paths, f.LocalPath)
	}
	start := time.Now()
	h, l, listErr, err := HashList(ctx, format, out.paths, p.cfg.Limits)
	p.m.observeStage(StageHash, start)
	if err != nil {
		return fetched{}, fmt.Errorf("hash %q: %w", parts[0].Document.FileName, err)
	}
	out.parts, out.sizes, out.content = h.Parts, h.Sizes, h.Content
	for _, n := range h.Sizes {
		out.size += n
	}
	out.listed = &listed{listing: l, err: listErr}
	return out, nil
}

// downloadTries is how many times one part's download is started within
// one attempt when TDLib stops it or it stalls. Trying the part again is
// cheaper than failing the attempt, which would fetch every part anew.
const downloadTries = 3

// download downloads one file, starting it again when it stops or stalls.
func (p *Pipeline) download(ctx context.Context, f tg.File) (tg.File, error) {
	for try := 1; ; try++ {
		got, err := p.tg.Download(ctx, f, p.cfg.DownloadStall)
		switch {
		case err == nil:
			return got, nil
		case errors.Is(err, tg.ErrDownloadStalled):
			p.m.downloadFailed(p.cfg.Account, DownloadStalled)
		case errors.Is(err, tg.ErrDownloadStopped):
			p.m.downloadFailed(p.cfg.Account, DownloadStopped)
		default:
			if ctx.Err() == nil {
				p.m.downloadFailed(p.cfg.Account, DownloadError)
			}
			return tg.File{}, err
		}
		if try >= downloadTries {
			return tg.File{}, err
		}
		p.log.Debug("download ended early; starting it again", "file", f.ID, "try", try, "err", err)
	}
}
