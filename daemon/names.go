package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"stashd/tg"
)

// resolveName turns a configured @username into a chat id for r's account.
// The first resolution is kept in the store and wins from then on: a
// channel that changes its @username (or hands it to another chat) keeps
// being the same source, where resolving the name again would stop the
// start or, worse, follow the name to another chat. Each start still asks
// (searchPublicChat, once per name), to warn when the name no longer leads
// to the stored chat; the warning is also kept for `stashd status`. A name
// never resolved before must resolve: a typo in the configuration must not
// look like an idle source.
func (d *Daemon) resolveName(ctx context.Context, r *accountRun, name string) (tg.ChatID, error) {
	key := strings.ToLower(strings.TrimPrefix(name, "@"))
	stored, known, err := d.store.ResolvedName(ctx, r.name, key)
	if err != nil {
		return 0, err
	}
	c, err := r.paced.SearchPublicChat(ctx, name)
	switch {
	case err != nil && !known:
		return 0, err
	case err != nil && !errors.Is(err, tg.ErrChatNotFound):
		// Telegram could not answer now: the stored chat stands, and the
		// name is checked again at the next start.
		r.log.Warn("could not check a configured @username; using the chat it resolved to before",
			"name", "@"+key, "chat", stored, "err", err)
		return stored, nil
	}
	current := c.ID // 0 when the name resolves to nothing any more
	if err != nil {
		current = 0
	}
	rec, err := d.store.RecordName(ctx, r.name, key, current)
	if err != nil {
		return 0, err
	}
	if rec.RenamedAt != nil {
		now := "no chat"
		if current != 0 {
			now = fmt.Sprintf("chat %d", current)
		}
		r.log.Warn("a configured @username no longer names its chat (the chat changed its name, or the name moved); "+
			"keeping the chat it first resolved to: update the configuration",
			"name", "@"+key, "source", rec.ChatID, "name_now_resolves_to", now)
	}
	return rec.ChatID, nil
}
