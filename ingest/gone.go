package ingest

import (
	"context"
	"errors"
	"fmt"

	"stashd/tg"
)

// DeletedAtSourceError says a source message went away before its package
// was fetched: it was deleted, or an edit replaced its document. TDLib
// cannot download a file no message carries any more, and retrying cannot
// bring it back. A message that carries another document now has that
// one handled in its place (Process); otherwise the message is recorded
// as deleted at source: a terminal dead letter, never retried, unless the
// read that found it gone proves nothing yet (notSeenError). It wraps
// tg.ErrMessageNotFound, a permanent error.
type DeletedAtSourceError struct {
	Key tg.MessageKey
	// Replaced: the message is still there with another document, or
	// with none.
	Replaced bool
	// Current is the message as it is now, when it carries a document.
	Current *tg.Message
	// Err, when set, is the read's 404 that found the message gone.
	Err error
}

func (e *DeletedAtSourceError) Error() string {
	if e.Replaced {
		return fmt.Sprintf("message %s: document replaced at source before it was fetched", e.Key)
	}
	var unseen *notSeenError
	if errors.As(e.Err, &unseen) {
		return fmt.Sprintf("message %s: not found at source before its package was fetched %s", e.Key, notSeenNote)
	}
	return fmt.Sprintf("message %s: deleted at source before its package was fetched", e.Key)
}

func (e *DeletedAtSourceError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return tg.ErrMessageNotFound
}

// classDeleted is the error class of a dead letter deleted at source.
const classDeleted = "deleted_at_source"

// deletedAtSource reports whether err says the source message is gone:
// the typed error above, or a getMessage that found nothing.
func deletedAtSource(err error) bool { return errors.Is(err, tg.ErrMessageNotFound) }

// sourceGone asks, after m's download failed, whether m still carries the
// file it was read with. It returns a DeletedAtSourceError when not, nil
// when it does (the download failed for another reason) or when the
// question itself fails (the download's own error then stands).
func (p *Pipeline) sourceGone(ctx context.Context, m tg.Message) error {
	cur, err := p.readMessage(ctx, m.ChatID, m.ID)
	switch {
	case errors.Is(err, tg.ErrMessageNotFound):
		return &DeletedAtSourceError{Key: m.Key(), Err: err}
	case errors.Is(err, tg.ErrNoAccess):
		// Not gone: out of reach. The download's error stands (the
		// message is retried), and the source's loss is for catch-up to
		// record.
		if p.cfg.AccessLost != nil {
			p.cfg.AccessLost(m.ChatID)
		}
		return nil
	case err != nil:
		return nil
	case cur.Document == nil:
		return &DeletedAtSourceError{Key: m.Key(), Replaced: true}
	case cur.Document.File.UniqueID != m.Document.File.UniqueID:
		return &DeletedAtSourceError{Key: m.Key(), Replaced: true, Current: &cur}
	}
	return nil
}

// replacement is the message whose document replaced the one err failed
// to fetch, if any.
func replacement(err error) (tg.Message, bool) {
	var gone *DeletedAtSourceError
	if errors.As(err, &gone) && gone.Current != nil {
		return *gone.Current, true
	}
	return tg.Message{}, false
}

// classUnconfirmed is the error class of a dead letter whose message a
// session could not find while it may not have seen it yet (notSeenError).
const classUnconfirmed = "unconfirmed_deletion"

// knownPosted reports whether message id of chat is no newer than the
// newest the session knows was posted there (tg.Session.KnownLast), so
// that a 404 for it is a deletion; false when that cannot be read.
func (p *Pipeline) knownPosted(ctx context.Context, chat tg.ChatID, id tg.MessageID) bool {
	last, err := p.tg.KnownLast(ctx, chat)
	return err == nil && last >= id
}

// notSeenError is a 404 for a message newer than anything the session
// knows of its chat (knownPosted): the message may be deleted, or not
// seen yet by a session whose view of the chat lags. TDLib answers 404 for
// a channel message newer than the last one the session learned through
// updates (a too new message not from update), and learns it only with
// the chat's difference: at a start, at an openChat, after a reconnect,
// each of which may take longer than tg.Views allows. A chat's newest
// message, deleted before the session saw anything newer, reads so too:
// a dead letter of it is retried (classUnconfirmed) and taken for the
// deletion at its last attempt, a delivery of it after as many tries as
// an unreadable source. It unwraps to the 404, so every other reader
// takes it as one.
type notSeenError struct{ err error }

// notSeenNote is what a notSeenError adds to its 404.
const notSeenNote = "(newer than the chat's last message this session knows: perhaps not seen yet)"

func (e *notSeenError) Error() string { return e.err.Error() + " " + notSeenNote }

func (e *notSeenError) Unwrap() error { return e.err }
