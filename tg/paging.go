package tg

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// Searcher is the one request paging needs.
type Searcher interface {
	SearchChatMessages(ctx context.Context, q Search) ([]Message, error)
}

// DocumentsAfter returns the next page of chat's documents with server ids
// above after, oldest first, at most about limit of them (0 or more than
// 100 means 100).
//
// searchChatMessages may return fewer messages than asked, and a short page
// keeps the newest of its window: taking its newest id as the next starting
// point could skip documents. So a page counts as whole only when it reaches
// back to after (it holds a message at or below it); otherwise the gap
// between after and the page's oldest document is searched backwards until
// it is closed.
func DocumentsAfter(ctx context.Context, s Searcher, chat ChatID, after int64, limit int) ([]Message, error) {
	if limit <= 1 || limit > MaxSearchLimit {
		limit = MaxSearchLimit
	}
	msgs, err := s.SearchChatMessages(ctx, Search{
		Chat: chat, FromMessageID: MessageIDFromServer(max(after, 1)),
		Offset: -(limit - 1), Limit: limit, Filter: FilterDocument,
	})
	if err != nil {
		return nil, fmt.Errorf("search documents after %d: %w", after, err)
	}
	page, reached := splitAfter(msgs, after, nil)
	for !reached && len(page) > 0 {
		oldest := slices.MinFunc(page, func(a, b Message) int { return cmp.Compare(a.ID, b.ID) }).ID.ServerID()
		if oldest-1 <= after {
			break // nothing can lie between
		}
		older, err := s.SearchChatMessages(ctx, Search{
			Chat: chat, FromMessageID: MessageIDFromServer(oldest - 1), Limit: limit, Filter: FilterDocument,
		})
		if err != nil {
			return nil, fmt.Errorf("search documents before %d: %w", oldest, err)
		}
		if len(older) == 0 {
			break // no document at or below oldest-1: the page is whole
		}
		page, reached = splitAfter(older, after, page)
	}
	slices.SortFunc(page, func(a, b Message) int { return cmp.Compare(a.ID, b.ID) })
	return slices.CompactFunc(page, func(a, b Message) bool { return a.ID == b.ID }), nil
}

// splitAfter appends to page the messages above after and reports whether
// any message was at or below it.
func splitAfter(msgs []Message, after int64, page []Message) ([]Message, bool) {
	reached := false
	for _, m := range msgs {
		if m.ID.ServerID() > after {
			page = append(page, m)
		} else {
			reached = true
		}
	}
	return page, reached
}
