package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"stashd/tg"
)

// checkStillCarries makes sure m, a part of package pkg fetched again from
// its source, still carries one of the package's files. An edit may have put
// another document in the message since the package was catalogued; sending
// that would record other bytes as this package. The new document is a
// package of its own (ingested from the edit); this one is gone from its
// source, which is final. known, when not nil, are unique ids read with the
// delivery's lock as naming pkg's files: a document among them needs no
// look (a unique id names one package for as long as it is catalogued),
// one not among them is looked up, as it may have been recorded since.
func (p *Pipeline) checkStillCarries(ctx context.Context, pkg int64, part int, m tg.Message, known []string) error {
	if m.Document == nil {
		return tg.Permanent(fmt.Errorf("part %d of package %d (%s) is no document any more", part, pkg, m.Key()))
	}
	if slices.Contains(known, m.Document.File.UniqueID) {
		return nil
	}
	holder, ok, err := p.store.PackageOfPart(ctx, m.Document.File.UniqueID)
	if err != nil {
		return err
	}
	if !ok || holder != pkg {
		return tg.Permanent(fmt.Errorf("part %d of package %d (%s): %w", part, pkg, m.Key(), errReplacedAtSource))
	}
	return nil
}

var errReplacedAtSource = errors.New("replaced at source by another document")

// loadPart reads part i of package pkg, key, through this session and
// checks it still carries one of pkg's files (checkStillCarries). A
// session answers getMessage from its own database, which, in a chat it
// does not follow (another account's source), may hold the message as it
// was before an edit: when the answer carries another document, the chat
// is opened (TDLib then fetches its difference, edits included) and the
// message read once more before the part is taken as replaced. TDLib
// fetches the difference after openChat has answered, and an already
// open chat is not fetched again: the read waits for the session's view
// of the chat (tg.Views), opened once per session. A view current already
// at the first read needs no second one; a chat that cannot be opened
// fails the load with that error, not as a part replaced.
func (p *Pipeline) loadPart(ctx context.Context, pkg int64, i int, key tg.MessageKey, known []string) (tg.Message, error) {
	asked := time.Now()
	m, err := p.readPart(ctx, pkg, i, key, known)
	if !errors.Is(err, errReplacedAtSource) {
		return m, err
	}
	stale, verr := p.cfg.Views.StaleAt(ctx, key.Chat, asked)
	switch {
	case !stale:
		return tg.Message{}, err
	case verr != nil:
		return tg.Message{}, fmt.Errorf("read part %d of package %d (%s) again once the chat is open: %w", i, pkg, key, verr)
	}
	again, rerr := p.readPart(ctx, pkg, i, key, known)
	if again.ID == 0 && rerr != nil {
		return tg.Message{}, errors.Join(err, rerr) // the read itself failed
	}
	return again, rerr
}

// readPart reads part i of package pkg, key, through this session once
// and checks it still carries one of pkg's files (known: checkStillCarries).
func (p *Pipeline) readPart(ctx context.Context, pkg int64, i int, key tg.MessageKey, known []string) (tg.Message, error) {
	m, err := p.readMessage(ctx, key.Chat, key.Message)
	if err != nil {
		return tg.Message{}, fmt.Errorf("fetch part %d of package %d (%s): %w", i, pkg, key, err)
	}
	return m, p.checkStillCarries(ctx, pkg, i, m, known)
}
