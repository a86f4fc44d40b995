package ingest

import (
	"context"
	"errors"

	"stashd/store"
	"stashd/tg"
)

// sameDocument is dedup layer 1 for *msg (doc: its record, looked up by
// the caller), aware that an edit can replace a
// message's document while keeping its id (editMessageMedia). When the
// catalogue recorded the message with another document than msg carries,
// the server says which one is current (one getMessage, only then):
//   - msg's: the old record is retired (store.ReplaceDocument) and msg is
//     not handled, so its new document is ingested as any other;
//   - the recorded one: msg is a stale view, already handled;
//   - a third: *msg becomes the current message, handled as above;
//   - none (the message is gone): nothing to do.
func (p *Pipeline) sameDocument(ctx context.Context, msg *tg.Message, doc store.Document) (store.Outcome, bool, error) {
	recorded := doc.UniqueID
	if !doc.OK || recorded == "" || recorded == msg.Document.File.UniqueID {
		return doc.Outcome, doc.OK, nil
	}
	cur, err := p.tg.GetMessage(ctx, msg.ChatID, msg.ID)
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
	if err := p.store.ReplaceDocument(ctx, msg.Key(), recorded, cur.Document.File.UniqueID); err != nil {
		return "", false, err
	}
	p.log.Info("source document replaced by an edit; mirroring the new one",
		"source", cur.ChatID, "message", cur.ID.ServerID(), "file", cur.Document.FileName)
	*msg = cur
	return "", false, nil
}
