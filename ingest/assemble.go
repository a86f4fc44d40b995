package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"stashd/archive"
	"stashd/store"
	"stashd/tg"
)

// addKnownOrPart records a part of a set, unless the same file (unique id)
// is already a part of a delivered package: a part posted again after its
// set was catalogued, or a forwarded set, is a duplicate part, not the start
// of a new set that could only end as a dead letter or, for a set's final
// x.zip, be mirrored again on its own. A package whose delivery is not
// complete is left to the set path, which finishes it.
func (p *Pipeline) addKnownOrPart(ctx context.Context, msg tg.Message, cls classification) (store.Outcome, error) {
	pkg, ok, err := p.store.PackageOfPart(ctx, msg.Document.File.UniqueID)
	if err != nil {
		return "", err
	}
	if ok {
		done, err := p.partDelivered(ctx, pkg, msg)
		if err != nil {
			return "", err
		}
		if done {
			return store.OutcomeDuplicate, p.record(ctx, []tg.Message{msg}, store.OutcomeDuplicate, pkg)
		}
	}
	return p.addPart(ctx, msg, cls)
}

// IncompleteSetError is the dead-letter reason of a multipart set or album
// that did not complete within SetMaxWait.
type IncompleteSetError struct {
	Set     string
	Missing string
}

func (e *IncompleteSetError) Error() string {
	return fmt.Sprintf("incomplete set %q: %s", e.Set, e.Missing)
}

// addPart records a part of a set; the sweeper completes the set once all
// its parts are in and it has been quiet for SetSettle.
//
// The set's parts that became dead letters because it was incomplete come
// back with it: this part may be the one that was missing (a late last
// volume), and waiting for their retry times would split the set again.
func (p *Pipeline) addPart(ctx context.Context, msg tg.Message, cls classification) (store.Outcome, error) {
	written, err := p.store.RecordMessage(ctx, sourceMessage(msg, store.OutcomePartPending, 0))
	if err != nil {
		return "", err
	}
	if !written {
		return "", errRecordedMeanwhile
	}
	if _, err := p.store.ReviveSet(ctx, msg.ChatID, msg.TopicID(), cls.setKey); err != nil {
		return "", err
	}
	p.keepSeen(msg)
	return store.OutcomePartPending, nil
}

// errRecordedMeanwhile says a part's record was kept out by one written
// since the message was looked up: another handling moved it on, or it
// was recorded for another document (an edit replaced it, and a failure
// of the old document was recorded last). Process handles the message
// again at once, and layer 1 then tells which document is current.
var errRecordedMeanwhile = errors.New("the message was recorded meanwhile")

func (p *Pipeline) forget(parts []tg.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range parts {
		delete(p.seen, m.Key())
	}
}

// SetFailedError is the dead-letter reason of the parts of a set that could
// not be completed: a part is gone (deleted, no document any more) or
// completing kept failing until SetMaxWait. The parts are retried later with
// backoff; a re-posted part can still complete the set.
type SetFailedError struct {
	Set string
	Err error
}

func (e *SetFailedError) Error() string {
	return fmt.Sprintf("set %q failed: %v", e.Set, e.Err)
}

// partError says which part of a set failed to load.
type partError struct {
	key tg.MessageKey
	err error
}

func (e *partError) Error() string { return fmt.Sprintf("load part %s: %v", e.key, e.err) }

func (e *partError) Unwrap() error { return e.err }

// message returns a set part as this session knows it: from memory, or
// fetched by id (file ids are per session, so after a restart the message
// must be loaded again before its file can be downloaded or re-sent). A
// fetched message is remembered, so a set that fails later costs its
// parts one getMessage each, not one per sweep.
func (p *Pipeline) message(ctx context.Context, key tg.MessageKey) (tg.Message, error) {
	p.mu.Lock()
	m, ok := p.seen[key]
	p.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := p.readMessage(ctx, key.Chat, key.Message)
	if err != nil {
		return tg.Message{}, &partError{key: key, err: err}
	}
	if m.Document == nil {
		return tg.Message{}, &partError{key: key, err: tg.Permanent(errors.New("no document any more"))}
	}
	p.keepSeen(m)
	return m, nil
}

// maxRemembered bounds each of the pipeline's memories of sets (seen,
// setFailures, notInAlbum). The parts of a set that never completes here
// (given up, or catalogued by another instance), its last failure and the
// ids found around it are never forgotten otherwise, and a daemon
// assembles sets for months.
const maxRemembered = 4096

// remember sets m[k] to v, emptying m first when k is new and m holds
// maxRemembered entries already: what it forgot costs one more look (a
// part read by id, an id looked up again, a failure logged again).
func remember[K comparable, V any](m map[K]V, k K, v V) {
	if _, ok := m[k]; !ok && len(m) >= maxRemembered {
		clear(m)
	}
	m[k] = v
}

// keepSeen remembers m, a set's part as this session knows it.
func (p *Pipeline) keepSeen(m tg.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	remember(p.seen, m.Key(), m)
}

// deadLetterSet records every part of a set as a dead letter for cause and
// logs the set once. A part that failed to load for good carries its own
// (permanent) error; the others carry the set's reason and are retried with
// backoff, so that a part posted again can still complete the set.
func (p *Pipeline) deadLetterSet(ctx context.Context, set store.PendingSet, parts []store.SourceMessage, cause error) error {
	var reason error = cause
	var pe *partError
	failedPart := errors.As(cause, &pe)
	var incomplete *IncompleteSetError
	switch {
	case errors.As(cause, &incomplete):
		reason = incomplete // the listing found a volume missing
	case !failedPart && tg.Classify(cause) == tg.ClassPermanent:
		// The whole set can never be fetched (access lost, content
		// protected): every part carries that reason, retried no more.
	default:
		reason = &SetFailedError{Set: displaySet(set.SetKey), Err: cause}
	}
	var errs []error
	var msgs []tg.Message
	for _, pt := range parts {
		msg := partStub(pt)
		msgs = append(msgs, msg)
		err := reason
		if failedPart && pt.Key == pe.key && tg.Classify(pe.err) == tg.ClassPermanent {
			err = cause
		}
		if dlErr := p.deadLetter(ctx, msg, err, false); dlErr != nil {
			errs = append(errs, dlErr)
		} else {
			p.count(store.OutcomeDeadLetter)
		}
	}
	p.forget(msgs)
	p.setFailed(set, nil)
	p.log.Warn("set is a dead letter", "source", set.Chat, "set", displaySet(set.SetKey), "parts", len(parts), "reason", cause)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dead-letter set %q: %w", set.SetKey, err)
	}
	// A part added while these were being dead-lettered revived the set
	// before there was anything to revive (addPart records, then revives;
	// this records, then looks): bring the letters back to it now, or the
	// set splits into two dead sets that each miss the other's parts.
	late, err := p.store.SetParts(ctx, set.Chat, set.TopicID, set.SetKey)
	if err != nil {
		return err
	}
	// Only a part of this set counts: the other sets pending under the
	// key (schemeGroups) are swept on their own.
	if !strings.HasPrefix(set.SetKey, "album:") {
		late = slices.DeleteFunc(late, func(pt store.SourceMessage) bool { return !sameSetGroup(parts[0], pt) })
	}
	if len(late) > 0 {
		if _, err := p.store.ReviveSet(ctx, set.Chat, set.TopicID, set.SetKey); err != nil {
			return err
		}
	}
	return nil
}

// setFailed remembers a set's retryable failure and logs it when it is new
// or its text changed; nil forgets it. Sweeps come every few seconds: a
// failing set must not write a line each time.
func (p *Pipeline) setFailed(set store.PendingSet, err error) {
	k := setID{set.Chat, set.TopicID, set.SetKey}
	p.mu.Lock()
	prev, had := p.setFailures[k]
	if err == nil {
		delete(p.setFailures, k)
	} else {
		remember(p.setFailures, k, err.Error())
	}
	p.mu.Unlock()
	if err != nil && (!had || prev != err.Error()) {
		p.log.Warn("complete set failed; retrying at the next sweep", "source", set.Chat, "set", displaySet(set.SetKey), "err", err)
	}
}

// setID names a pending set.
type setID struct {
	chat  tg.ChatID
	topic int64
	key   string
}

// partStub is a pending part as the store knows it, enough to dead-letter it.
func partStub(pt store.SourceMessage) tg.Message {
	msg := tg.Message{ID: pt.Key.Message, ChatID: pt.Key.Chat, AlbumID: pt.AlbumID, Date: pt.Date,
		Document: &tg.Document{FileName: pt.FileName, File: tg.File{Size: pt.FileSize, UniqueID: pt.UniqueID}}}
	if pt.TopicID != 0 {
		msg.IsTopicMessage, msg.ThreadID = true, pt.TopicID
	}
	return msg
}

func (p *Pipeline) completeSet(ctx context.Context, set store.PendingSet, parts []store.SourceMessage) error {
	msgs := make([]tg.Message, len(parts))
	for i, pt := range parts {
		m, err := p.message(ctx, pt.Key)
		if err != nil {
			return err
		}
		if pt.UniqueID != "" && m.Document.File.UniqueID != pt.UniqueID {
			return p.partReplaced(ctx, pt, m)
		}
		msgs[i] = m
	}
	format := archive.ParseName(msgs[0].Document.FileName).Format
	if strings.HasPrefix(set.SetKey, "album:") {
		format = albumFormat // listed part by part
	}
	name := msgs[0].Document.FileName
	_, err := p.fetchPackage(ctx, msgs, format, name)
	if !errors.Is(err, errPlainAmongOthers) {
		return err
	}
	// Archives are judged by their bytes: a plain x.rar or x.zip that is
	// a whole archive is a package of its own, and the set's other parts
	// wait for theirs (or become dead letters, as any incomplete set).
	i := plainPart(msgs)
	alone, err := p.takenAlone(ctx, parts[i])
	if err != nil {
		return err
	}
	if alone {
		p.log.Info("a whole archive among a set's parts was catalogued on its own; the other parts wait for their set",
			"source", set.Chat, "name", msgs[i].Document.FileName, "parts", len(msgs)-1)
		return errPlainTakenAlone
	}
	// Not whole alone either: the set as its parts came, refused or
	// mirrored as broken.
	_, err = p.fetchPackage(withPlainJudged(ctx), msgs, format, name)
	return err
}

// errPlainTakenAlone says a set was not completed because its plain
// x.zip or x.rar was a whole archive, catalogued on its own: the set's
// other parts (and their copies) are swept again without it.
var errPlainTakenAlone = errors.New("the set's plain archive was taken on its own")

// errPartReplaced says a set was not completed because one of its parts
// carries another document than the one recorded; the sweep tries again.
var errPartReplaced = errors.New("a part's document was replaced by an edit")

// partReplaced handles part pt of a set whose message, as loaded (m),
// carries another document than the one recorded: an edit replaced it
// after the part was recorded, and its update was lost or is not handled
// yet. The set is not completed with m, whose record the part's would
// keep out (a set completed, its parts never recorded, at every sweep).
// As sameDocument decides: when m is the newer view, the part's record is
// retired and m handled at once, as the edit's update would have been (a
// volume uploaded again rejoins the set); when m is older (a copy kept
// since before the edit), it is forgotten, and the part loaded again at
// the next sweep.
func (p *Pipeline) partReplaced(ctx context.Context, pt store.SourceMessage, m tg.Message) error {
	p.forget([]tg.Message{m})
	doc := store.Document{Outcome: pt.Outcome, UniqueID: pt.UniqueID, EditDate: pt.EditDate, OK: true}
	if _, stale, err := p.sameDocument(ctx, &m, doc); err != nil || stale {
		return errors.Join(err, errPartReplaced)
	}
	if _, err := p.Process(ctx, m); err != nil {
		return err
	}
	return errPartReplaced
}

// setGap looks up the ids around a set's parts, at most one getMessage
// each per session, and reports whether one is a part of the set not yet
// recorded: it is handled at once, and the set completes at a later sweep
// with it. For an album it asks for the ids missing between its documents;
// for every set, the ids just after its last part and just before its
// first; before a settled album's first, only those recorded (setMember's
// recordedOnly). Settled (quiet, and the source synced up to the last
// part) proves nothing about what follows: parts whose updates were lost,
// with nothing posted after them to reveal the gap, look exactly like the
// set's end. A multipart
// set's earlier volumes (a split zip's x.z01… before its x.zip) are asked
// for too, since its name alone cannot say it is whole.
func (p *Pipeline) setGap(ctx context.Context, setKey string, parts []store.SourceMessage, settled bool) (bool, error) {
	album := strings.HasPrefix(setKey, "album:")
	have := map[int64]bool{}
	for _, pt := range parts {
		have[pt.Key.Message.ServerID()] = true
	}
	first, last := parts[0].Key.Message.ServerID(), parts[len(parts)-1].Key.Message.ServerID()
	gap := false
	if album {
		for s := first + 1; s < last; s++ {
			if have[s] {
				continue
			}
			member, err := p.setMember(ctx, setKey, parts[0], s, false)
			if err != nil {
				return false, err
			}
			gap = gap || member
		}
	}
	// Outwards from the parts: the set ends at the first id that is not
	// one of its parts.
	for _, dir := range []int64{-1, 1} {
		s := first - 1
		if dir > 0 {
			s = last + 1
		}
		for ; s >= 1 && s >= first-setLookahead && s <= last+setLookahead; s += dir {
			if have[s] {
				continue
			}
			// Synced past an album, every id before it was handled:
			// Telegram is asked of none of them.
			recordedOnly := dir < 0 && settled && album
			member, err := p.setMember(ctx, setKey, parts[0], s, recordedOnly)
			if err != nil {
				return false, err
			}
			if !member {
				break
			}
			gap = true
		}
	}
	return gap, nil
}

// setMember reports whether message s of the chat of part is a document
// of the set setKey (in part's topic) that its parts, as the sweep read
// them, lack. One recorded as such a part since they were read (another
// handling, a worker's or catch-up's, recorded it meanwhile) is one: the
// set completes at a later sweep with it. One never recorded, or whose
// handling failed (a dead letter), is read from Telegram unless
// recordedOnly says an unrecorded id is no part, and joins the set here if
// it is one. Ids found to be something else are remembered for the
// session.
func (p *Pipeline) setMember(ctx context.Context, setKey string, part store.SourceMessage, s int64, recordedOnly bool) (bool, error) {
	chat := part.Key.Chat
	key := tg.MessageKey{Chat: chat, Message: tg.MessageIDFromServer(s)}
	probe := setProbe{setKey, key}
	p.mu.Lock()
	known := p.notInAlbum[probe]
	p.mu.Unlock()
	if known {
		return false, nil
	}
	notMember := func() (bool, error) {
		p.notMember(probe)
		return false, nil
	}
	var doc store.Document
	if err := p.store.Look(ctx, store.LookMessageDocument(key, &doc)); err != nil {
		return false, err
	}
	switch {
	case doc.OK && doc.Outcome == store.OutcomePartPending && doc.SetKey == setKey && doc.TopicID == part.TopicID &&
		(strings.HasPrefix(setKey, "album:") || sameSetGroup(part, store.SourceMessage{FileName: doc.FileName})):
		return true, nil // recorded since the parts were read
	case doc.OK && doc.Outcome != store.OutcomeDeadLetter:
		return notMember() // recorded already as something else
	case !doc.OK && recordedOnly:
		return false, nil
	}
	// Through readMessage: a 404 for an id newer than the session's view
	// of the chat is no proof that the set ends before it.
	m, err := p.readMessage(ctx, chat, key.Message)
	if err != nil && tg.Classify(err) != tg.ClassPermanent {
		return false, fmt.Errorf("look up message %d near set %s: %w", s, displaySet(setKey), err)
	}
	if err != nil || m.Document == nil || m.TopicID() != part.TopicID || classify(m).setKey != setKey {
		return notMember() // deleted, not yet sent, or not of the set
	}
	// One of the set's parts that never came through classify: it joins
	// the set here, as it would have from there.
	if m.Protected {
		return false, fmt.Errorf("part %d of set %s: %w", s, displaySet(setKey), tg.ErrProtectedContent)
	}
	if _, err := p.addKnownOrPart(ctx, m, classify(m)); err != nil {
		return false, fmt.Errorf("add message %d to set %s: %w", s, displaySet(setKey), err)
	}
	return true, nil
}

// notMember remembers that probe's message is no part of its set.
func (p *Pipeline) notMember(probe setProbe) {
	p.mu.Lock()
	defer p.mu.Unlock()
	remember(p.notInAlbum, probe, true)
}

// setProbe is a message looked up as a possible part of a set.
type setProbe struct {
	set string
	key tg.MessageKey
}

// setLookahead is how many ids before a set's first part and after its last
// may hold another part while they are in flight: an album has at most ten
// documents, with consecutive ids, and the parts of a multipart set are
// posted together (the final x.zip of a split set last, its x.z01… before).
const setLookahead = 10

// albumFormat marks a package whose parts are independent archives.
const albumFormat archive.Format = "album"

func displaySet(key string) string {
	_, name, _ := strings.Cut(key, ":")
	return name
}

// schemeGroups splits the parts pending under one set key (in message id
// order) into the sets they can make, each in message id order. A plain
// x.zip or x.rar shares its key with the x.z01… or x.r00… set it may
// close or open, and with x.zip.001… and x.part1.rar…, whose sets never
// take it in (holdsPlain): those two schemes are sets of their own, and
// the plain name goes with the others. An album is one set.
func schemeGroups(setKey string, parts []store.SourceMessage) [][]store.SourceMessage {
	if strings.HasPrefix(setKey, "album:") {
		return [][]store.SourceMessage{parts}
	}
	var groups [][]store.SourceMessage
	for _, pt := range parts {
		i := slices.IndexFunc(groups, func(g []store.SourceMessage) bool { return sameSetGroup(g[0], pt) })
		if i < 0 {
			groups = append(groups, nil)
			i = len(groups) - 1
		}
		groups[i] = append(groups[i], pt)
	}
	return groups
}

// sameSetGroup reports whether parts a and b, pending under one set key,
// may belong to one set (schemeGroups).
func sameSetGroup(a, b store.SourceMessage) bool {
	return setGroup(archive.ParseName(a.FileName)) == setGroup(archive.ParseName(b.FileName))
}

// setGroup is the naming scheme of the sets n may belong to, as far as
// they share their names: x.zip.001… and x.part1.rar… are their own, and
// x.z01… and x.r00… are those of a plain x.zip or x.rar ("").
func setGroup(n archive.Name) archive.Scheme {
	switch n.Scheme {
	case archive.SchemeNumbered, archive.SchemeRarPart:
		return n.Scheme
	}
	return ""
}

// sweptGroup is the set a sweep takes of the parts pending under setKey
// (schemeGroups): the first complete one, else the one holding the
// oldest part. The others wait for the next sweeps.
func sweptGroup(setKey string, parts []store.SourceMessage) []store.SourceMessage {
	groups := schemeGroups(setKey, parts)
	for _, g := range groups {
		if _, _, _, missing := orderSet(setKey, g); missing == "" {
			return g
		}
	}
	return groups[0]
}

// orderSet puts the parts of a set in order and says what is missing ("" when
// complete). Albums are ordered by message id and complete by definition;
// multipart sets follow archive.OrderParts (parts 1..n without holes, the
// final part when the naming scheme has one); a lone plain archive is a
// complete set of one.
//
// A part posted twice is a duplicate part, not a broken set. The same
// Telegram file (unique id) posted again is returned in dups. Another file
// under a part's name (a re-upload, a damaged or truncated copy; same name
// and size is not the same bytes) is returned in contested: only its
// bytes can say which copy belongs in the set (assembleByContent). The
// first copy posted of each part stands in ordered.
func orderSet(setKey string, parts []store.SourceMessage) (ordered, dups, contested []store.SourceMessage, missing string) {
	if strings.HasPrefix(setKey, "album:") {
		return parts, nil, nil, "" // already by message id
	}
	type partID struct {
		base string
		part int
	}
	first := map[partID]store.SourceMessage{}
	kept := make([]store.SourceMessage, 0, len(parts))
	names := make([]archive.Name, 0, len(parts))
	for _, pt := range parts { // by message id: the first posted wins
		n := archive.ParseName(pt.FileName)
		k := partID{n.Base, n.Part}
		if f, ok := first[k]; ok {
			if f.UniqueID == pt.UniqueID {
				dups = append(dups, pt)
			} else {
				contested = append(contested, pt)
			}
			continue
		}
		first[k] = pt
		kept = append(kept, pt)
		names = append(names, n)
	}
	o := archive.OrderParts(names)
	if !o.Complete {
		return parts, nil, nil, missingNames(names, o, cmp.Or(o.Reason, "incomplete"))
	}
	ordered = make([]store.SourceMessage, len(o.Order))
	for i, idx := range o.Order {
		ordered[i] = kept[idx]
	}
	return ordered, dups, contested, ""
}

// settleDuplicateParts records the parts posted twice of a set just
// completed as duplicates of its package.
func (p *Pipeline) settleDuplicateParts(ctx context.Context, ordered, dups []store.SourceMessage) error {
	if len(dups) == 0 {
		return nil
	}
	pkg, err := p.setPackage(ctx, ordered)
	if err != nil {
		return err
	}
	msgs := make([]tg.Message, len(dups))
	for i, d := range dups {
		msgs[i] = partStub(d)
	}
	if err := p.record(ctx, msgs, store.OutcomeDuplicate, pkg); err != nil {
		return err
	}
	for range dups {
		p.count(store.OutcomeDuplicate)
	}
	return nil
}

// setPackage returns the package a set just completed became, 0 when it
// is not known.
func (p *Pipeline) setPackage(ctx context.Context, ordered []store.SourceMessage) (int64, error) {
	uniq := make([]string, len(ordered))
	for i, pt := range ordered {
		uniq[i] = pt.UniqueID
	}
	pkg, ok, err := p.store.PackageByUniqueIDs(ctx, uniq)
	if err != nil || ok {
		return pkg, err
	}
	// The set's bytes matched a package cut into other parts: its first
	// part's file is known only if that package recorded it.
	pkg, ok, err = p.store.PackageOfPart(ctx, uniq[0])
	if err != nil || !ok {
		return 0, err
	}
	return pkg, nil
}

// setCatalogued reports whether the package of a complete set is in the
// catalogue already (a failure to look counts as no).
func (p *Pipeline) setCatalogued(ctx context.Context, ordered []store.SourceMessage) bool {
	uniq := make([]string, len(ordered))
	for i, pt := range ordered {
		uniq[i] = pt.UniqueID
	}
	_, ok, err := p.store.PackageByUniqueIDs(ctx, uniq)
	return err == nil && ok
}
