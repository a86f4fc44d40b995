package tgsim

import (
	"context"
	"slices"
	"strings"
	"time"
	"unicode"

	"stashd/tg"
)

// SearchChatMessages implements tg.Client with searchChatMessages'
// semantics:
//
//   - matching messages are ordered newest first (descending id);
//   - the window starts at the first matching message with id <=
//     FromMessageID (0 = the newest message), and a negative Offset moves the
//     start -Offset matching messages toward newer ones; the window is not
//     refilled when fewer newer messages exist;
//   - Limit must be 1..100 and, with a negative Offset, greater than
//     -Offset; a positive Offset is an error (all 400). TDLib itself quietly
//     lowers a Limit above 100; the simulator refuses it so that callers
//     never rely on more;
//   - FilterDocument keeps document messages, ThreadID keeps one forum
//     topic (0 = the whole chat, every topic);
//   - a non-empty Query is a server-side full-text search, as Telegram's:
//     word-based (every word of the query must begin a word of the caption
//     or text, case-insensitively; "oken" does not find "token") and
//     lagging (a message younger than SearchIndexLag is not found at all).
//     Never rely on it to find a given message: list with an empty query
//     and match locally.
//
// With probability ShortPageRate the page is shorter than it could be (but
// not empty when it could hold something): it keeps the newest part of the
// window and loses the oldest, as when the server stops early. A caller that
// pages toward newer messages must therefore check that a page reached back
// to its FromMessageID. A search the session's database cannot answer
// (searchLocal) is the server's, and waits while the account is offline.
func (c *Client) SearchChatMessages(ctx context.Context, q tg.Search) ([]tg.Message, error) {
	return call(ctx, c, tg.MethodSearchChatMessages, func() ([]tg.Message, error) {
		switch {
		case q.Limit <= 0:
			return nil, errBadRequest("Parameter limit must be positive")
		case q.Limit > tg.MaxSearchLimit:
			return nil, errBadRequest("Parameter limit must not exceed %d", tg.MaxSearchLimit)
		case q.Limit <= -q.Offset:
			return nil, errBadRequest("Parameter limit must be greater than -offset")
		case q.Offset > 0:
			return nil, errBadRequest("Parameter offset must be non-positive")
		case q.FromMessageID < 0:
			return nil, errBadRequest("Parameter from_message_id must be identifier of a chat message or 0")
		}
		ch, err := c.serverChat(q.Chat)
		if err != nil {
			return nil, err
		}
		if q.ThreadID != 0 && (ch.kind != tg.KindForum || ch.topics[q.ThreadID] == nil) {
			return nil, errBadRequest("Invalid message thread identifier specified")
		}
		if page, ok := c.searchLocal(ch, q); ok {
			return c.views(page), nil
		}
		if err := c.needsServer(); err != nil {
			return nil, err
		}
		page := c.w.searchWindow(ch, q)
		// A page shorter than asked for is the chat's end, unless the
		// server cut it short.
		end := len(page) < q.Limit
		if len(page) >= 2 && c.w.chance(c.w.cfg.ShortPageRate) {
			page = page[:1+c.w.rng.IntN(len(page)-1)]
			end = false
		}
		if kept := c.hideTooNew(ch, page); len(kept) < len(page) {
			page, end = kept, false
		}
		c.noteServerSearch(ch, q, page, end)
		return c.views(page), nil
	})
}

// views renders msgs as this client sees them. w.mu is held.
func (c *Client) views(msgs []*message) []tg.Message {
	out := make([]tg.Message, len(msgs))
	for i, m := range msgs {
		out[i] = c.view(m)
	}
	return out
}

// searchWindow returns the full page q asks for, newest first: up to
// -Offset matches newer than FromMessageID, then up to Limit+Offset matches
// at or below it. It walks only the messages the window needs.
func (w *World) searchWindow(ch *chat, q tg.Search) []*message {
	query := words(q.Query)
	indexed := w.now().Add(-w.cfg.SearchIndexLag)
	pivot := len(ch.msgs) - 1 // newest message <= FromMessageID
	if q.FromMessageID != 0 {
		i, found := ch.index(q.FromMessageID)
		if !found {
			i--
		}
		pivot = i
	}
	var newer []*message // oldest first while collecting
	for i := pivot + 1; i < len(ch.msgs) && len(newer) < -q.Offset; i++ {
		if matchSearch(ch.msgs[i], q, query, indexed) {
			newer = append(newer, ch.msgs[i])
		}
	}
	page := make([]*message, 0, q.Limit)
	for i := len(newer) - 1; i >= 0; i-- {
		page = append(page, newer[i])
	}
	for i, older := pivot, 0; i >= 0 && older < q.Limit+q.Offset; i-- {
		if matchSearch(ch.msgs[i], q, query, indexed) {
			page = append(page, ch.msgs[i])
			older++
		}
	}
	return page
}

func matchSearch(m *message, q tg.Search, query []string, indexed time.Time) bool {
	if q.Filter == tg.FilterDocument && m.doc == nil {
		return false
	}
	if q.ThreadID != 0 && (!m.isTopic || m.thread != q.ThreadID) {
		return false
	}
	if len(query) == 0 {
		return true
	}
	if m.date.After(indexed) {
		return false // not in the server's search index yet
	}
	have := append(words(m.caption), words(m.text)...)
	for _, qw := range query {
		if !slices.ContainsFunc(have, func(w string) bool { return strings.HasPrefix(w, qw) }) {
			return false
		}
	}
	return true
}

// words splits s into lower-case words: runs of letters and digits.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// GetChatHistory implements tg.Client with getChatHistory's semantics
// (offset 0, only_local false): up to limit messages of every kind, newest
// first, from the message with id from (inclusive; or the newest below it
// when from is gone or not a message id; 0: the newest message) back. A
// limit outside 1..100 is 400. With probability ShortPageRate the page is
// shorter than it could be (never empty when it could hold something), as
// when TDLib answers the part its local database holds and leaves the
// rest to the next request; an empty page is the chat's beginning. From
// the end (from 0) the page starts at the last message the session's
// database knows (historyEnd), not the server's newest. The session's own
// messages being sent and failed are on the page among the others, by id.
// A page holding a message the session's database lacks is read from the
// server, so while the account is offline it waits for the reconnect. A
// message the session deleted is not on it, even while its deletion waits
// for the connection (DeleteMessages).
func (c *Client) GetChatHistory(ctx context.Context, chat tg.ChatID, from tg.MessageID, limit int) ([]tg.Message, error) {
	return call(ctx, c, tg.MethodGetChatHistory, func() ([]tg.Message, error) {
		switch {
		case limit <= 0:
			return nil, errBadRequest("Parameter limit must be positive")
		case limit > tg.MaxSearchLimit:
			return nil, errBadRequest("Parameter limit must not exceed %d", tg.MaxSearchLimit)
		case from < 0:
			return nil, errBadRequest("Invalid value of parameter from_message_id specified")
		}
		ch, err := c.serverChat(chat)
		if err != nil {
			return nil, err
		}
		start, upTo := len(ch.msgs)-1, from
		if from == 0 {
			from = c.historyEnd(ch)
		}
		if from != 0 {
			i, found := ch.index(from)
			if !found {
				i--
			}
			start = i
		}
		var page []*message
		for i := start; i >= 0 && len(page) < limit; i-- {
			if !c.knowsDeleted(chat, ch.msgs[i].id) { // deleted here, not yet on the server
				page = append(page, ch.msgs[i])
			}
		}
		if len(page) >= 2 && c.w.chance(c.w.cfg.ShortPageRate) {
			page = page[:1+c.w.rng.IntN(len(page)-1)]
		}
		// The session's own messages being sent or failed are in its
		// history too (localmsgs.go), down to the oldest server message
		// the page covers (shown or too new to show) unless that is the
		// chat's first: one below it would make the next page, read from
		// it, skip the server messages in between.
		var down tg.MessageID
		if len(page) > 0 && page[len(page)-1] != ch.msgs[0] {
			down = page[len(page)-1].id
		}
		page = c.hideTooNew(ch, page)
		if !c.holdsAll(ch, page) {
			if err := c.needsServer(); err != nil {
				return nil, err
			}
		}
		c.remember(page...)
		page = c.withLocal(ch.id, page, upTo, down, limit)
		return c.views(page), nil
	})
}
