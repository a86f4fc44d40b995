package tgsim

import (
	"fmt"

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
	c.topics[m.thread] = &topic{thread: m.thread, name: name, creator: creator}
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
