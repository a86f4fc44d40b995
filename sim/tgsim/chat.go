package tgsim

import (
	"sort"
	"time"

	"stashd/tg"
)

// chat is a channel, supergroup, forum or private chat and its history.
type chat struct {
	id    tg.ChatID
	kind  tg.ChatKind
	title string
	// username is the public @name, without the @; "" for private chats.
	username string
	private  bool
	// lostAccess: the members lost access, but their clients still know
	// the chat locally: getChat and openChat succeed, server calls fail
	// with 400 "Can't access the chat", and no update is delivered.
	lostAccess bool
	// protected chats have protected content: their messages cannot be
	// saved or forwarded (can_be_saved false).
	protected bool
	// archived chats are in the archive chat list: unknown to a client
	// until it has loaded that list.
	archived bool
	// lastUnknown makes the chat's last message unknown to clients
	// (chat.last_message null); while set, new messages reach clients
	// without updateNewMessage or updateChatLastMessage, as TDLib may add
	// them.
	lastUnknown bool
	members     []string // join order, for a deterministic delivery order
	isMem       map[string]bool
	msgs        []*message // live messages, ascending id
	lastSeq     int64      // last server id handed out; deletions leave holes
	topics      map[int64]*topic
	// deletedTopics holds the threads of deleted forum topics: a send
	// into one fails with 400 TOPIC_DELETED.
	deletedTopics map[int64]bool
	// sendLimit limits each account's sends into the chat
	// (LimitChatSends); nil: none.
	sendLimit *chatSendLimit
	// upgradedTo is the supergroup a basic group became; no message is
	// posted in it any more.
	upgradedTo tg.ChatID
	// fileRefs counts the live messages carrying each unique id, so that
	// "can this account see the file" costs no scan.
	fileRefs map[string]int
}

// topic is a forum topic.
type topic struct {
	thread int64
	name   string
	// creator is the account that created the topic ("" for one the world
	// made): it may close and reopen it without the right to manage topics.
	creator string
	closed  bool
	// created is the date of its creation message, which getForumTopics
	// orders it by while it has no other message.
	created time.Time
}

// message is a live message; deleted messages are removed from the chat.
type message struct {
	id   tg.MessageID
	chat tg.ChatID
	date time.Time
	// edited is when an edit last replaced the document (editDate);
	// zero when never.
	edited  time.Time
	thread  int64
	isTopic bool
	albumID int64
	caption string
	text    string
	doc     *docRef
	// sender is the account that sent the message (sendMessage); "" for
	// messages posted by the world (World.Post), which no account sent.
	sender string
	// upgradedTo marks the messageChatUpgradeTo service message.
	upgradedTo tg.ChatID
}

// The chat methods below run with w.mu held.

// index finds id by binary search: msgs are in ascending id order.
func (c *chat) index(id tg.MessageID) (int, bool) {
	i := sort.Search(len(c.msgs), func(i int) bool { return c.msgs[i].id >= id })
	return i, i < len(c.msgs) && c.msgs[i].id == id
}

func (c *chat) find(id tg.MessageID) *message {
	if i, ok := c.index(id); ok {
		return c.msgs[i]
	}
	return nil
}

// setDoc replaces m's document, keeping fileRefs in step.
func (c *chat) setDoc(m *message, d *docRef) {
	if m.doc != nil {
		if c.fileRefs[m.doc.uid]--; c.fileRefs[m.doc.uid] <= 0 {
			delete(c.fileRefs, m.doc.uid)
		}
	}
	m.doc = d
	if d != nil {
		c.fileRefs[d.uid]++
	}
}

func (c *chat) lastID() tg.MessageID {
	if len(c.msgs) == 0 {
		return 0
	}
	return c.msgs[len(c.msgs)-1].id
}

func (w *World) topicView(c *chat, thread int64) tg.Topic {
	t := tg.Topic{ChatID: c.id, ThreadID: thread, Name: c.topics[thread].name, IsClosed: c.topics[thread].closed}
	for i := len(c.msgs) - 1; i >= 0; i-- {
		if m := c.msgs[i]; m.isTopic && m.thread == thread {
			t.LastMessageID = m.id
			break
		}
	}
	return t
}

// neutralView renders m as seen by no particular account.
func (w *World) neutralView(m *message) tg.Message {
	out := baseView(m)
	if m.doc != nil {
		out.Document = &tg.Document{FileName: m.doc.name, MimeType: m.doc.mime, File: tg.File{
			Size:     int64(len(w.files[m.doc.uid].data)),
			UniqueID: m.doc.uid,
		}}
	}
	return out
}

func baseView(m *message) tg.Message {
	return tg.Message{
		ID:             m.id,
		ChatID:         m.chat,
		Date:           m.date,
		EditDate:       m.edited,
		ThreadID:       m.thread,
		IsTopicMessage: m.isTopic,
		AlbumID:        m.albumID,
		Caption:        m.caption,
		UpgradedTo:     m.upgradedTo,
	}
}
