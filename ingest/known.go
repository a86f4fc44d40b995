package ingest

import (
	"context"
	"errors"

	"stashd/tg"
)

// knownMessage fetches a message stashd has a record of: a set's part, a
// dead letter, a part of a package it delivers. TDLib answers 404 for a
// channel message newer than the last one its session learned through
// updates: it drops the server's answer as too new and fetches the chat's
// difference instead (MessagesManager::add_message_to_dialog). A session
// that did not follow the chat while another session (another instance,
// another account) handled the message therefore does not know it yet.
// So a 404 is asked again once the difference can have come (tg.Views),
// before it is taken for a deletion: a message deleted for real costs one
// request and a wait more.
func (p *Pipeline) knownMessage(ctx context.Context, chat tg.ChatID, id tg.MessageID) (tg.Message, error) {
	m, err := p.tg.GetMessage(ctx, chat, id)
	if !errors.Is(err, tg.ErrMessageNotFound) {
		return m, err
	}
	if werr := p.cfg.Views.Wait(ctx); werr != nil {
		return m, err
	}
	return p.tg.GetMessage(ctx, chat, id)
}
