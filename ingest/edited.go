package ingest

import (
	"context"
	"errors"

	"stashd/store"
	"stashd/tg"
)

// sameDocument is dedup layer 1 for *msg (doc: its record, looked up by
// the caller), aware that an edit can replace a message's document while
// keeping its id (editMessageMedia). When the catalogue recorded the
// message with another document than msg carries, the edit dates tell
// which view is current: a session answers from its own database, which
// may not have heard of an edit another session's view recorded.
//   - msg is newer: the old record is retired (store.ReplaceDocument) and
//     msg is not handled, so its new document is ingested as any other;
//   - msg is older (stale): the record stands, msg is already handled.
//
// A record made before edit dates were kept counts as never edited. Only
// when the dates are equal (two edits within one second, or neither side
// edited) is the message read again (one getMessage), and then:
//   - msg's document is current: as newer above;
//   - the recorded one: as stale above;
//   - a third: *msg becomes the current message, handled as newer;
//   - none (the message is gone): nothing to do.
func (p *Pipeline) sameDocument(ctx context.Context, msg *tg.Message, doc store.Document) (store.Outcome, bool, error) {
	recorded := doc.UniqueID
	if !doc.OK || recorded == "" || recorded == msg.Document.File.UniqueID {
		return doc.Outcome, doc.OK, nil
	}
	switch {
	case doc.Stale(*msg):
		return store.OutcomeDuplicate, true, nil
	case doc.Newer(*msg):
		return p.replaceDocument(ctx, *msg, recorded)
	}
	cur, err := p.readMessage(ctx, msg.ChatID, msg.ID)
	switch {
	case errors.Is(err, tg.ErrMessageNotFound):
		return store.OutcomeDuplicate, true, nil
	case err != nil:
		return "", false, err
	case cur.Document == nil:
		*msg = cur
		return store.OutcomeDuplicate, true, nil
	case cur.Document.File.UniqueID == recorded:
		return store.OutcomeDuplicate, true, nil
	}
	*msg = cur
	return p.replaceDocument(ctx, cur, recorded)
}

// replaceDocument retires the record of cur's message made for the
// document recorded, which cur's replaced.
func (p *Pipeline) replaceDocument(ctx context.Context, cur tg.Message, recorded string) (store.Outcome, bool, error) {
	if err := p.store.ReplaceDocument(ctx, cur.Key(), recorded, cur.Document.File.UniqueID); err != nil {
		return "", false, err
	}
	p.log.Info("source document replaced by an edit; mirroring the new one",
		"source", cur.ChatID, "message", cur.ID.ServerID(), "file", cur.Document.FileName)
	return "", false, nil
}
