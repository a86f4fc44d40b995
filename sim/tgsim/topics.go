package tgsim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"stashd/tg"
)

// AddTopic creates a forum topic in chat, which must be a forum. Like
// Telegram it posts the topic's creation service message; the topic's thread
// id is that message's id. Clients that opened the chat receive the new
// message and updateForumTopicInfo.
func (w *World) AddTopic(chat tg.ChatID, name string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	if c.kind != tg.KindForum {
		panic(fmt.Sprintf("tgsim: AddTopic: chat %d is a %s, not a forum", chat, c.kind))
	}
	return w.addTopic(c, name, "")
}

// addTopic is AddTopic with w.mu held, creator the account that creates
// it ("" for the world). The name is kept as given: a topic the world
// makes stands for one made by any client, while TDLib cleans the names
// of the topics it creates (Client.CreateForumTopic does so).
func (w *World) addTopic(c *chat, name, creator string) int64 {
	m := w.newMessage(c)
	m.thread, m.isTopic = int64(m.id), true
	c.topics[m.thread] = &topic{thread: m.thread, name: name, creator: creator, created: m.date}
	w.publish(c, m, nil)
	w.topicChanged(c, m.thread)
	return m.thread
}

// Topics returns the names of chat's forum topics by thread id.
func (w *World) Topics(chat tg.ChatID) map[int64]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int64]string{}
	for id, t := range w.mustChat(chat).topics {
		out[id] = t.name
	}
	return out
}

// RenameTopic renames a forum topic. Like Telegram it posts a "topic edited"
// service message in the topic (which takes a server id), and clients that
// opened the chat receive updateForumTopicInfo.
func (w *World) RenameTopic(chat tg.ChatID, thread int64, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	t := c.topics[thread]
	if t == nil {
		panic(fmt.Sprintf("tgsim: RenameTopic: chat %d has no topic %d", chat, thread))
	}
	t.name = name
	m := w.newMessage(c)
	m.thread, m.isTopic = thread, true
	w.publish(c, m, nil)
	w.topicChanged(c, thread)
}

func (w *World) topicChanged(c *chat, thread int64) {
	w.eachClient(c, func(cl *Client) {
		if cl.opened[c.id] {
			cl.enqueue(tg.ForumTopicInfo{Topic: w.topicView(c, thread)})
		}
	})
}

// SearchForumTopics implements tg.Client (getForumTopics): a page of the
// forum's topics whose names contain query, ignoring case (Telegram matches
// words; a name equal to the query is always found), in the server's
// order: by last message, its date (in seconds) then its id, the most
// recently active first (a topic without a message by its creation), as
// channels.getForumTopics answers unless order_by_create_date. The page
// holds the topics after offset (a zero date, as TDLib documents it, starts
// from the first), at most limit and never more than tg.MaxSearchLimit (the
// server's cap). Its next offsets are the last topic's, taken as TDLib
// takes them: its last message's date and id (its creation date and no id
// without one) and its thread; an empty page has zero offsets, so the end
// is a page with no topic. TotalCount counts every matching topic. Pinned
// topics, which the server lists first, are not modelled.
func (c *Client) SearchForumTopics(ctx context.Context, chat tg.ChatID, query string, offset tg.TopicOffset, limit int) (tg.TopicPage, error) {
	return call(ctx, c, tg.MethodGetForumTopics, func() (tg.TopicPage, error) {
		ch, err := c.serverChat(chat)
		if err != nil {
			return tg.TopicPage{}, err
		}
		// ForumTopicManager::get_forum_topics checks these before it asks.
		switch {
		case ch.kind != tg.KindForum:
			return tg.TopicPage{}, errBadRequest("The chat is not a forum")
		case offset.Date.Unix() < 0 && !offset.Date.IsZero():
			return tg.TopicPage{}, errBadRequest("Invalid offset date specified")
		case offset.MessageID != 0 && !offset.MessageID.IsServer():
			return tg.TopicPage{}, errBadRequest("Invalid offset message identifier specified")
		case offset.ThreadID != 0 && !tg.MessageID(offset.ThreadID).IsServer():
			return tg.TopicPage{}, errBadRequest("Invalid message thread identifier specified")
		case limit <= 0:
			return tg.TopicPage{}, errBadRequest("Invalid limit specified")
		}
		if err := c.needsServer(); err != nil {
			return tg.TopicPage{}, err
		}
		return ch.forumTopicsPage(strings.ToLower(query), offset, min(limit, tg.MaxSearchLimit)), nil
	})
}

// topicPlace is where a topic stands in getForumTopics' order.
type topicPlace struct {
	topic tg.Topic
	date  int64        // of its last message, or of its creation; seconds
	id    tg.MessageID // its last message, or its thread without one
}

// after reports whether p comes after the place (date, id, thread) in the
// order, the most recently active first.
func (p topicPlace) after(date int64, id tg.MessageID, thread int64) bool {
	return cmp.Or(cmp.Compare(p.date, date), cmp.Compare(p.id, id), cmp.Compare(p.topic.ThreadID, thread)) < 0
}

// forumTopicsPage is SearchForumTopics' page, with w.mu held.
func (c *chat) forumTopicsPage(query string, offset tg.TopicOffset, limit int) tg.TopicPage {
	last := map[int64]*message{}
	for _, m := range slices.Backward(c.msgs) {
		if _, seen := last[m.thread]; m.isTopic && !seen {
			last[m.thread] = m
		}
	}
	var found []topicPlace
	for thread, t := range c.topics {
		if !strings.Contains(strings.ToLower(t.name), query) {
			continue
		}
		p := topicPlace{topic: tg.Topic{ChatID: c.id, ThreadID: thread, Name: t.name, IsClosed: t.closed},
			date: t.created.Unix(), id: tg.MessageID(thread)}
		if m := last[thread]; m != nil {
			p.topic.LastMessageID, p.date, p.id = m.id, m.date.Unix(), m.id
		}
		found = append(found, p)
	}
	slices.SortFunc(found, func(a, b topicPlace) int {
		return cmp.Or(cmp.Compare(b.date, a.date), cmp.Compare(b.id, a.id), cmp.Compare(b.topic.ThreadID, a.topic.ThreadID))
	})
	page := tg.TopicPage{TotalCount: len(found)}
	if !offset.Date.IsZero() {
		// The topics after the offset's: TDLib sends no message id for a
		// topic it knows no last message of, which stands at its thread.
		id := offset.MessageID
		if id == 0 {
			id = tg.MessageID(offset.ThreadID)
		}
		found = slices.DeleteFunc(found, func(p topicPlace) bool { return !p.after(offset.Date.Unix(), id, offset.ThreadID) })
	}
	for _, p := range found[:min(limit, len(found))] {
		page.Topics = append(page.Topics, p.topic)
		page.Next = tg.TopicOffset{Date: time.Unix(p.date, 0), MessageID: p.topic.LastMessageID, ThreadID: p.topic.ThreadID}
	}
	return page
}
