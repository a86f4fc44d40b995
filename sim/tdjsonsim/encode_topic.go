package tdjsonsim

import "stashd/tg"

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

// forumTopicsObject is getForumTopics' answer: one page, so the next
// offsets are those of its last topic (zero for an empty page).
func forumTopicsObject(topics []tg.Topic) object {
	list := make([]object, len(topics))
	for i, t := range topics {
		list[i] = forumTopicObject(t)
	}
	var lastMsg, lastThread int64
	if len(topics) > 0 {
		last := topics[len(topics)-1]
		lastMsg, lastThread = int64(last.LastMessageID), last.ThreadID
	}
	return object{
		{"@type", "forumTopics"},
		{"total_count", len(topics)},
		{"topics", list},
		{"next_offset_date", 0},
		{"next_offset_message_id", lastMsg},
		{"next_offset_message_thread_id", lastThread},
	}
}
