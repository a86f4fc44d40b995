package tdjsonsim

import (
	"context"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// forumTopicInfoObject is TDLib's forumTopicInfo. The simulator keeps no
// icon, creation date or creator: they are written as TDLib's defaults.
func forumTopicInfoObject(t tg.Topic) object {
	return object{
		{"@type", "forumTopicInfo"},
		{"message_thread_id", t.ThreadID},
		{"name", t.Name},
		{"icon", object{{"@type", "forumTopicIcon"}, {"color", 7322096}, {"custom_emoji_id", "0"}}},
		{"creation_date", 0},
		{"creator_id", object{{"@type", "messageSenderChat"}, {"chat_id", int64(t.ChatID)}}},
		{"is_general", false},
		{"is_outgoing", false},
		{"is_closed", t.IsClosed},
		{"is_hidden", false},
	}
}

// createdForumTopicInfoObject is createForumTopic's answer: the topic's
// forumTopicInfo, created by the account (is_outgoing).
func createdForumTopicInfoObject(t tg.Topic) object {
	o := forumTopicInfoObject(t)
	for i := range o {
		if o[i].key == "is_outgoing" {
			o[i].val = true
		}
	}
	return o
}

// forumTopicObject is TDLib's forumTopic (getForumTopic).
func forumTopicObject(t tg.Topic) object {
	o := withLastMessage(object{
		{"@type", "forumTopic"},
		{"info", forumTopicInfoObject(t)},
	}, t.ChatID, t.LastMessageID)
	return append(o, object{
		{"is_pinned", false},
		{"unread_count", 0},
		{"last_read_inbox_message_id", int64(t.LastMessageID)},
		{"last_read_outbox_message_id", 0},
		{"unread_mention_count", 0},
		{"unread_reaction_count", 0},
		{"notification_settings", defaultNotificationSettings()},
	}...)
}

// getForumTopics answers a page of a forum's topics, as the server pages
// them (tgsim.Client.SearchForumTopics).
func getForumTopics(ctx context.Context, cl *tgsim.Client, r *request) (object, error) {
	var p struct {
		ChatID                tdInt  `json:"chat_id"`
		Query                 string `json:"query"`
		OffsetDate            tdInt  `json:"offset_date"`
		OffsetMessageID       tdInt  `json:"offset_message_id"`
		OffsetMessageThreadID tdInt  `json:"offset_message_thread_id"`
		Limit                 tdInt  `json:"limit"`
	}
	if err := r.params(&p); err != nil {
		return nil, err
	}
	offset := tg.TopicOffset{MessageID: tg.MessageID(p.OffsetMessageID), ThreadID: int64(p.OffsetMessageThreadID)}
	switch {
	case p.OffsetDate < 0:
		// ForumTopicManager::get_forum_topics
		return nil, tdError(400, "Invalid offset date specified")
	case p.OffsetDate > 0:
		offset.Date = time.Unix(int64(p.OffsetDate), 0)
	}
	page, err := cl.SearchForumTopics(ctx, tg.ChatID(p.ChatID), p.Query, offset, int(p.Limit))
	if err != nil {
		return nil, err
	}
	return forumTopicsObject(page), nil
}

// forumTopicsObject is getForumTopics' answer: the page's topics, the
// server's count of the matching topics and the next offsets, which TDLib
// takes from the page's last topic (all zero for an empty page).
func forumTopicsObject(page tg.TopicPage) object {
	list := make([]object, len(page.Topics))
	for i, t := range page.Topics {
		list[i] = forumTopicObject(t)
	}
	var date int64
	if !page.Next.Date.IsZero() {
		date = page.Next.Date.Unix()
	}
	return object{
		{"@type", "forumTopics"},
		{"total_count", page.TotalCount},
		{"topics", list},
		{"next_offset_date", date},
		{"next_offset_message_id", int64(page.Next.MessageID)},
		{"next_offset_message_thread_id", page.Next.ThreadID},
	}
}
