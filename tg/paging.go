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

// TopicSearcher is the one request ForumTopics needs.
type TopicSearcher interface {
	SearchForumTopics(ctx context.Context, chat ChatID, query string, offset TopicOffset, limit int) (TopicPage, error)
}

// ForumTopics pages through the topics of forum chat whose names match
// query (getForumTopics, MaxSearchLimit a page), in the server's order,
// and returns those of every page.
//
// The pages end with an empty one (TDLib's next offsets are then zero, and
// sending them would start over), or with one shorter than asked once the
// topics read reach the server's count (TDLib may answer fewer than asked
// with more to come, and the count is approximate: either alone is no
// end). A next offset that does not move on ends them too, so that a
// server answering the same page again cannot keep the walk going.
func ForumTopics(ctx context.Context, s TopicSearcher, chat ChatID, query string) ([]Topic, error) {
	var out []Topic
	var offset TopicOffset
	for {
		page, err := s.SearchForumTopics(ctx, chat, query, offset, MaxSearchLimit)
		if err != nil {
			return out, err
		}
		out = append(out, page.Topics...)
		switch {
		case len(page.Topics) == 0 || page.Next.IsZero() || page.Next.same(offset),
			len(page.Topics) < MaxSearchLimit && len(out) >= page.TotalCount:
			return out, nil
		}
		offset = page.Next
	}
}

// same reports whether o and p start the same page.
func (o TopicOffset) same(p TopicOffset) bool {
	return o.Date.Equal(p.Date) && o.MessageID == p.MessageID && o.ThreadID == p.ThreadID
}
