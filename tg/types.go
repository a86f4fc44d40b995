package tg

import (
	"fmt"
	"time"
)

// ChatID is a TDLib chat identifier. Channels and supergroups have negative
// ids of the form -100xxxxxxxxxx.
type ChatID int64

// MessageID is a TDLib message identifier. Server messages have ids that are
// multiples of 2^20; the server id is MessageID >> 20.
type MessageID int64

// ServerIDShift is the number of low bits TDLib adds to a server message id.
const ServerIDShift = 20

// ServerID returns the server-side sequence number of id, or 0 when id is a
// local (unsent or temporary) message id.
func (id MessageID) ServerID() int64 {
	if id <= 0 || id%(1<<ServerIDShift) != 0 {
		return 0
	}
	return int64(id) >> ServerIDShift
}

// IsServer reports whether id names a message that exists on the server.
func (id MessageID) IsServer() bool { return id.ServerID() != 0 }

// ServerFloor returns the server id of id or, for a local id (a message
// being sent, or whose send failed), that of the server message it
// follows: TDLib makes a local id above the last server id it knew. 0 for
// none.
func (id MessageID) ServerFloor() int64 {
	if id <= 0 {
		return 0
	}
	return int64(id) >> ServerIDShift
}

// MessageIDFromServer converts a server sequence number to a TDLib message id.
func MessageIDFromServer(s int64) MessageID { return MessageID(s << ServerIDShift) }

// ChatKind says what sort of chat a source is.
type ChatKind string

// Chat kinds stashd distinguishes.
const (
	KindChannel    ChatKind = "channel"
	KindSupergroup ChatKind = "supergroup"
	KindForum      ChatKind = "forum"
	KindPrivate    ChatKind = "private"
	// KindBasicGroup is a basic (small) group. Its message ids come from
	// the account's own message box, not a per-chat sequence, so they have
	// no continuity; it may be upgraded to a supergroup with a new chat id.
	KindBasicGroup ChatKind = "basic_group"
)

// Chat is what getChat returns, reduced to what stashd uses.
type Chat struct {
	ID    ChatID
	Kind  ChatKind
	Title string
	// LastMessageID is the id of the newest message, 0 when the chat is empty
	// or TDLib does not know it yet (chat.last_message null).
	LastMessageID MessageID
	// Protected is has_protected_content: messages of the chat cannot be
	// forwarded or saved, so its documents cannot be re-sent.
	Protected bool
}

// User is the logged-in account as getMe reports it.
type User struct {
	ID        int64
	Username  string
	IsPremium bool
}

// UploadLimit is the largest file the account may upload: 2000 MB, or 4000 MB
// for Premium accounts.
func (u User) UploadLimit() int64 {
	if u.IsPremium {
		return 4000 << 20
	}
	return 2000 << 20
}

// File is a TDLib file: its session-local id, its remote identity and its
// local download state.
type File struct {
	ID   int32
	Size int64
	// RemoteID can be passed to inputFileRemote by an account that can see the
	// message carrying the file. It differs between accounts.
	RemoteID string
	// UniqueID identifies the file's content on Telegram and is the same for
	// every account. Re-uploading the same bytes yields a new UniqueID.
	UniqueID string
	// LocalPath is set once a download has completed.
	LocalPath      string
	Downloaded     int64
	DownloadDone   bool
	DownloadActive bool
}

// Document is a message's document attachment.
type Document struct {
	FileName string
	MimeType string
	File     File
}

// Message is a chat message reduced to what stashd uses.
type Message struct {
	ID     MessageID
	ChatID ChatID
	Date   time.Time
	// EditDate is when the message was last edited (edit_date); zero
	// when never. An edit that replaced its document (editMessageMedia)
	// makes it later than any view of the old document.
	EditDate time.Time
	// ThreadID is the forum topic (message_thread_id) when IsTopicMessage.
	ThreadID       int64
	IsTopicMessage bool
	// AlbumID groups the messages of one album (media_album_id), 0 when none.
	AlbumID int64
	Caption string
	// Protected is the negation of TDLib's can_be_saved: the message's
	// content is protected and cannot be forwarded or re-sent
	// ("Message has protected content and can't be forwarded").
	Protected bool
	// Document is nil for anything that is not a document message.
	Document *Document
	// UpgradedTo is the supergroup a basic group became, on its
	// messageChatUpgradeTo service message; 0 on any other message.
	UpgradedTo ChatID
}

// TopicID is the forum topic a message belongs to, 0 outside topics.
func (m Message) TopicID() int64 {
	if m.IsTopicMessage {
		return m.ThreadID
	}
	return 0
}

// Key identifies the message across the catalogue.
func (m Message) Key() MessageKey { return MessageKey{Chat: m.ChatID, Message: m.ID} }

// MessageKey is the source key of a message: its chat and id.
type MessageKey struct {
	Chat    ChatID
	Message MessageID
}

func (k MessageKey) String() string { return fmt.Sprintf("%d/%d", k.Chat, k.Message.ServerID()) }

// Topic is a forum topic.
type Topic struct {
	ChatID   ChatID
	ThreadID int64
	Name     string
	// LastMessageID may be 0: TDLib's getForumTopic can return no last message.
	LastMessageID MessageID
	// IsClosed: the topic is closed (forumTopicInfo.is_closed); only
	// members who may manage topics post in it.
	IsClosed bool
}

// TopicOffset is where a page of getForumTopics starts (offset_date,
// offset_message_id, offset_message_thread_id): zero for the first page,
// then the Next of the page before, which TDLib takes from that page's
// last topic.
type TopicOffset struct {
	// Date is the date of the last topic's last message, or its creation
	// date when TDLib knows no last message (seconds, as Telegram dates).
	Date time.Time
	// MessageID is the last topic's last message; 0 when TDLib knows none.
	MessageID MessageID
	// ThreadID is the last topic's thread.
	ThreadID int64
}

// IsZero reports whether o is the zero offset: the first page, or the Next
// of an empty page (the end of the topics).
func (o TopicOffset) IsZero() bool { return o.Date.IsZero() && o.MessageID == 0 && o.ThreadID == 0 }

// TopicPage is one page of getForumTopics (forumTopics).
type TopicPage struct {
	Topics []Topic
	// TotalCount is the server's approximate number of matching topics.
	TotalCount int
	// Next starts the following page; zero after an empty page.
	Next TopicOffset
}

// SearchFilter selects the kind of messages searchChatMessages returns.
type SearchFilter string

// Filters stashd uses.
const (
	FilterDocument SearchFilter = "document"
	FilterNone     SearchFilter = ""
)

// Search is a searchChatMessages request.
type Search struct {
	Chat  ChatID
	Query string
	// FromMessageID is where the search starts; 0 means the newest message.
	FromMessageID MessageID
	// Offset shifts the window: a negative offset (down to -99) returns
	// messages newer than FromMessageID.
	Offset int
	// Limit is at most 100.
	Limit  int
	Filter SearchFilter
	// ThreadID restricts the search to one forum topic; 0 is the whole chat.
	ThreadID int64
}

// MaxSearchLimit is the largest Limit searchChatMessages accepts.
const MaxSearchLimit = 100

// ConnectionState is TDLib's connection state.
type ConnectionState string

// Connection states, as TDLib names them without the prefix.
const (
	ConnWaitingForNetwork ConnectionState = "waitingForNetwork"
	ConnConnectingToProxy ConnectionState = "connectingToProxy"
	ConnConnecting        ConnectionState = "connecting"
	ConnUpdating          ConnectionState = "updating"
	ConnReady             ConnectionState = "ready"
)
