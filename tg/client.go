package tg

import (
	"context"
	"time"
)

// Client is the port: the TDLib requests stashd makes for one account. Each
// method is one TDLib request and is named after it. Implementations are
// safe for concurrent use.
//
// Updates are delivered on the channel returned by Updates. The consumer must
// drain it continuously (Session does): an adapter's receiver may block on a
// full channel, and with go-tdlib a blocked receiver stalls every request.
type Client interface {
	// Updates returns the client's update stream. It is closed by Close.
	Updates() <-chan Update
	// LoadChats loads the chat list; getChat and openChat fail with
	// ErrChatNotFound until it has run.
	LoadChats(ctx context.Context) error
	// GetMe returns the logged-in account.
	GetMe(ctx context.Context) (User, error)
	// GetChat returns a chat from the client's local state. It is cheap.
	GetChat(ctx context.Context, chat ChatID) (Chat, error)
	// SearchPublicChat resolves a public @username (without the @) to its
	// chat; unknown names fail with ErrChatNotFound.
	SearchPublicChat(ctx context.Context, username string) (Chat, error)
	// OpenChat asks for realtime updates of chat. Supergroups and channels
	// receive updates only while open.
	OpenChat(ctx context.Context, chat ChatID) error
	// SearchChatMessages searches one chat (searchChatMessages).
	SearchChatMessages(ctx context.Context, q Search) ([]Message, error)
	// GetChatHistory returns up to limit (1..100) messages of chat, newest
	// first, starting at from (inclusive; 0: the newest message) and going
	// back (getChatHistory with offset 0, only_local false). TDLib answers
	// from its local database first and asks the server where the local
	// history has a hole, so a page may hold fewer messages than asked;
	// an empty page is the beginning of the chat.
	GetChatHistory(ctx context.Context, chat ChatID, from MessageID, limit int) ([]Message, error)
	// GetMessage fetches one message by id.
	GetMessage(ctx context.Context, chat ChatID, id MessageID) (Message, error)
	// GetChatMessageByDate returns the last message sent before or at date.
	GetChatMessageByDate(ctx context.Context, chat ChatID, date time.Time) (Message, error)
	// GetForumTopic returns a forum topic.
	GetForumTopic(ctx context.Context, chat ChatID, threadID int64) (Topic, error)
	// DownloadFile starts an asynchronous download of file and returns its
	// current state; progress and completion arrive as FileUpdated updates
	// (none arrive when the returned file is already complete).
	DownloadFile(ctx context.Context, file int32) (File, error)
	// CancelDownloadFile stops a download of file (cancelDownloadFile with
	// only_if_pending false); TDLib reports the stop as a FileUpdated that
	// is neither active nor complete. Cancelling an idle file is harmless.
	CancelDownloadFile(ctx context.Context, file int32) error
	// DeleteFile deletes the local copy of file (deleteFile), cancelling a
	// download in progress. TDLib never deletes downloaded files itself.
	// The file stays usable on Telegram (inputFileRemote).
	DeleteFile(ctx context.Context, file int32) error
	// SendDocument sends a document already on Telegram (inputFileRemote) to
	// chat. It returns the temporary message; the outcome arrives as
	// SendSucceeded or SendFailed carrying its id.
	SendDocument(ctx context.Context, chat ChatID, remoteFileID, caption string) (Message, error)
	// SendDocumentTo is SendDocument into forum topic thread of chat
	// (sendMessage's message_thread_id), with opts (sendMessage's
	// messageSendOptions); thread 0 is the chat itself (in a forum: its
	// General topic). A thread that is no topic of chat fails with 400.
	SendDocumentTo(ctx context.Context, chat ChatID, thread int64, remoteFileID, caption string, opts SendOptions) (Message, error)
	// SendDocumentAlbum sends items, 1 to MaxAlbum documents already on
	// Telegram, into thread of chat as one album (sendMessageAlbum): one
	// request, whose messages share a media_album_id (a single item is sent
	// as an ordinary message). It returns the temporary messages in the
	// items' order; each message's outcome arrives on its own, as
	// SendSucceeded or SendFailed carrying its id, and the outcomes may
	// differ. An item that cannot be sent (a wrong remote id, a caption too
	// long) refuses the whole request with 400 and nothing is sent.
	SendDocumentAlbum(ctx context.Context, chat ChatID, thread int64, items []AlbumItem, opts SendOptions) ([]Message, error)
	// CreateForumTopic creates a topic named name in forum chat
	// (createForumTopic) and returns its thread id
	// (forumTopicInfo.message_thread_id). A chat that is not a forum fails
	// with 400.
	CreateForumTopic(ctx context.Context, chat ChatID, name string) (threadID int64, err error)
	// SearchForumTopics returns one page, of up to limit (1..100), of the
	// topics of forum chat whose names match query, as the server finds
	// them (getForumTopics): the most recently active first, starting
	// after offset (zero: from the first). The caller compares names
	// itself; ForumTopics pages through them.
	SearchForumTopics(ctx context.Context, chat ChatID, query string, offset TopicOffset, limit int) (TopicPage, error)
	// ToggleForumTopicIsClosed closes or reopens forum topic thread of
	// chat (toggleForumTopicIsClosed). The account needs the right to
	// manage topics there, or to have created the topic: otherwise 400
	// "Not enough rights to close or open the topic".
	ToggleForumTopicIsClosed(ctx context.Context, chat ChatID, thread int64, closed bool) error
	// DeleteMessages deletes messages ids of chat (deleteMessages); with
	// revoke, for every member (in channels and supergroups always). The
	// account may delete its own messages, others' only with the right to
	// delete messages there: otherwise nothing is deleted and the request
	// fails with 400 "Message can't be deleted". An id TDLib does not know
	// is skipped. The client receives MessagesDeleted for what it deleted.
	DeleteMessages(ctx context.Context, chat ChatID, ids []MessageID, revoke bool) error
	// Close stops the client and closes its update stream.
	Close() error
}

// AlbumItem is one document of an album: a file already on Telegram
// (inputFileRemote) and its caption.
type AlbumItem struct {
	RemoteFileID string
	Caption      string
}

// MaxAlbum is the most messages one album holds (TDLib refuses more with
// 400 "Too many messages to send as an album").
const MaxAlbum = 10

// SendOptions are the options of a send (TDLib's messageSendOptions) that
// stashd sets; the zero value is TDLib's default.
type SendOptions struct {
	// Silent sends without a notification (disable_notification): the
	// members of the destination are not alerted.
	Silent bool
}

// Method names used to count and rate-limit requests, as TDLib spells them.
const (
	MethodLoadChats            = "loadChats"
	MethodGetMe                = "getMe"
	MethodGetChat              = "getChat"
	MethodOpenChat             = "openChat"
	MethodSearchPublicChat     = "searchPublicChat"
	MethodSearchChatMessages   = "searchChatMessages"
	MethodGetMessage           = "getMessage"
	MethodGetChatHistory       = "getChatHistory"
	MethodGetChatMessageByDate = "getChatMessageByDate"
	MethodGetForumTopic        = "getForumTopic"
	MethodDownloadFile         = "downloadFile"
	MethodCancelDownloadFile   = "cancelDownloadFile"
	MethodDeleteFile           = "deleteFile"
	MethodSendMessage          = "sendMessage"
	MethodSendMessageAlbum     = "sendMessageAlbum"
	MethodCreateForumTopic     = "createForumTopic"
	MethodGetForumTopics       = "getForumTopics"
	MethodDeleteMessages       = "deleteMessages"
	// MethodToggleForumTopicIsClosed closes or reopens a forum topic.
	MethodToggleForumTopicIsClosed = "toggleForumTopicIsClosed"
)
