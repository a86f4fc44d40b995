package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"stashd/archive"
	"stashd/store"
	"stashd/tg"
)

// Handle runs msg through the ingest path once. See the package doc.
func (p *Pipeline) Handle(ctx context.Context, msg tg.Message) (store.Outcome, error) {
	if p.m != nil && !msg.Date.IsZero() {
		p.m.age.Observe(p.cfg.Now().Sub(msg.Date).Seconds())
	}
	start := time.Now()
	if msg.Document == nil {
		// Nothing to mirror, look up or record: catch-up and rescan page
		// documents only, and the watermark covers this message. Recording
		// it would cost a commit per chat message and would make a document
		// edited into it later look handled.
		return store.OutcomeNotArchive, nil
	}
	// Layer 1: the source key, as long as the message still carries the
	// document it was handled with (sameDocument). Layer 2 for an archive
	// of one message (its unique id is a known package's) rides in the
	// same round trip.
	var doc store.Document
	var known *store.Found
	var pre *uniqueLock
	var waits setWaits
	uid := msg.Document.File.UniqueID
	if c := classify(msg); p.lockFirst(msg, c) {
		// A lone archive, new as a rule: layer 3's lock is taken with the
		// looks of layers 1 and 2, in their round trip, unless it was
		// taken ahead (Prelock).
		if pre = p.claimPrelocked(msg.Key(), uid); pre == nil {
			var err error
			if pre, err = p.lockLone(ctx, msg, c); err != nil {
				return "", err
			}
		}
		defer pre.lock.Unlock() // when nothing released it
		doc, known, waits = pre.handled, &pre.again, pre.waits
		start = time.Now() // the round trip counts as the lock stage
	} else {
		reads := []store.Statement{store.LookMessageDocument(msg.Key(), &doc)}
		if c.archive {
			known = &store.Found{}
			reads = append(reads, store.LookPackageByUniqueIDs([]string{uid}, known))
		}
		if err := p.store.Look(ctx, reads...); err != nil {
			return "", err
		}
	}
	if pre != nil && doc.OK {
		// Handled before, maybe with another document: the lock is not
		// needed, or not for the document the message carries now.
		pre.lock.Unlock()
		pre = nil
	}
	out, ok, err := p.sameDocument(ctx, &msg, doc)
	if err != nil {
		return "", err
	}
	if ok && out != store.OutcomeDeadLetter {
		if out == store.OutcomePartPending {
			return out, nil
		}
		return store.OutcomeDuplicate, nil
	}
	p.ensureTopic(ctx, msg)
	cls := classify(msg)
	if msg.Document.File.UniqueID != uid {
		// An edit replaced the document: layer 2 for the new one.
		known = nil
		if cls.archive {
			known = &store.Found{}
			if err := p.store.Look(ctx, store.LookPackageByUniqueIDs([]string{msg.Document.File.UniqueID}, known)); err != nil {
				return "", err
			}
		}
	}
	p.m.observeStage(StageClassify, start)
	if cls.archive && msg.Protected && (p.cfg.Accept == nil || p.cfg.Accept(msg)) {
		// The source protects its content: the document cannot be re-sent,
		// so neither download nor retry can help. A permanent dead letter
		// records why.
		return "", fmt.Errorf("mirror %s: %w", msg.Document.FileName, tg.ErrProtectedContent)
	}
	switch {
	case !cls.archive || (p.cfg.Accept != nil && !p.cfg.Accept(msg)):
		return store.OutcomeNotArchive, p.store.RecordMessages(ctx, sourceMessage(msg, store.OutcomeNotArchive, 0))
	case cls.maybeVolume(msg):
		// A plain zip or rar already catalogued on its own (a forward of a
		// known archive) need not wait for parts that will not come. Any
		// other's bytes tell whether it is a whole archive or a volume of a
		// set, unless it is a part of a known package or its set has begun
		// already (addKnownOrPart), or it is a dead letter, whose retry
		// takes the set path.
		part := waits.part(cls) || pre != nil && pre.holding.OK
		if known.OK || !part && (!doc.OK || doc.Outcome != store.OutcomeDeadLetter) {
			out, err := p.fetchAlone(ctx, msg, cls, known, pre)
			if !errors.Is(err, errMayBeVolume) {
				return out, err
			}
		}
		return p.addKnownOrPart(ctx, msg, cls)
	case cls.setKey != "":
		// Every document of an album too: a forwarded album's final x.zip
		// must not be left alone once its x.z01… are known duplicates.
		return p.addKnownOrPart(ctx, msg, cls)
	default:
		if pre != nil {
			return p.fetchLocked(ctx, []tg.Message{msg}, cls.name.Format, msg.Document.FileName, known, pre)
		}
		return p.fetchLooked(ctx, []tg.Message{msg}, cls.name.Format, msg.Document.FileName, known)
	}
}

// lockFirst reports whether msg, classified as c, takes layer 3's lock in
// its first round trip: a lone archive (no set, no album, or a plain x.zip
// or x.rar, whose bytes decide) to be mirrored. A message handled before
// costs a lock it then lets go; the rescan and catch-up hand over only
// messages not handled yet.
func (p *Pipeline) lockFirst(msg tg.Message, c classification) bool {
	return c.archive && (c.setKey == "" || c.maybeVolume(msg)) && !msg.Protected && (p.cfg.Accept == nil || p.cfg.Accept(msg))
}

type classification struct {
	archive bool
	name    archive.Name
	setKey  string
	part    int
}

// maybeVolume reports whether msg, classified as c, is a plain x.zip or
// x.rar outside an album: a whole archive, or a volume of a set, which
// only its bytes tell.
func (c classification) maybeVolume(msg tg.Message) bool {
	return c.setKey != "" && !c.name.IsMultipart() && msg.AlbumID == 0
}

// setWaits is what the first round trip (the lock's, lockLone) reads for
// a plain x.zip or x.rar (maybeVolume) to tell, without its bytes, that it
// is a part: a volume of its set (holdsPlain) is waiting already, or
// (sibling, Prelock) is on its way with it.
type setWaits struct {
	setKey  string   // the set the read was made for
	pending []string // the file names of its set's parts waiting
	sibling bool
}

func (w *setWaits) reads(msg tg.Message, c classification) []store.Statement {
	w.setKey = c.setKey
	return []store.Statement{store.LookSetPending(msg.ChatID, msg.TopicID(), c.setKey, &w.pending)}
}

// part reports whether the read says a message classified as c is a part:
// only when it was made for c's set (an edit may have renamed the
// document since).
func (w *setWaits) part(c classification) bool {
	if w.setKey != c.setKey {
		return false
	}
	return w.sibling || slices.ContainsFunc(w.pending, func(name string) bool { return holdsPlain(archive.ParseName(name)) })
}

// holdsPlain reports whether n is a volume of a naming scheme whose set a
// plain x.zip or x.rar belongs to: x.z01… (whose final part is x.zip) or
// x.r00… (whose first is x.rar). The sets of x.zip.001… and x.part1.rar…
// share the plain name's set key but never take it in.
func holdsPlain(n archive.Name) bool {
	return n.Scheme == archive.SchemeZipSplit || n.Scheme == archive.SchemeRarOld
}

// classify decides what a message is: not an archive, a single archive, or
// a part of a set (an album of archives, or a multipart set by name). A
// plain x.zip or x.rar is ambiguous by name (maybeVolume): it may be the
// final part of x.z01… or the first of x.r00…, whose other parts may still
// be in flight. Its bytes decide (fetchAlone).
func classify(msg tg.Message) classification {
	if msg.Document == nil || emptyDocument(msg) {
		return classification{}
	}
	n := archive.ParseName(msg.Document.FileName)
	c := classification{archive: n.IsArchive() || sniffed(msg), name: n}
	switch {
	case !c.archive:
	case msg.AlbumID != 0:
		c.setKey = fmt.Sprintf("album:%d", msg.AlbumID)
	case n.IsMultipart():
		c.setKey = "set:" + n.Set
		c.part = n.Part
	case n.Format == archive.FormatZip || n.Format == archive.FormatRar:
		c.setKey = "set:" + n.Base
	}
	return c
}

// ensureTopic stores the name of a forum topic the first time one of its
// messages is handled: one getForumTopic per topic, ever (renames arrive as
// updateForumTopicInfo and the listener stores them).
func (p *Pipeline) ensureTopic(ctx context.Context, msg tg.Message) {
	thread := msg.TopicID()
	if thread == 0 {
		return
	}
	k := topicKey{msg.ChatID, thread}
	p.mu.Lock()
	known := p.topics[k]
	p.mu.Unlock()
	if known {
		return
	}
	if _, err := p.sourceTopicName(ctx, msg.ChatID, thread); err != nil {
		// The name is for people; a missing one must not hold back the
		// archive.
		p.log.Warn("get forum topic", "source", msg.ChatID, "topic", thread, "err", err)
		return
	}
	p.mu.Lock()
	p.topics[k] = true
	p.mu.Unlock()
}
