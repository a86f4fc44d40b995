//go:build !libtdjson

package tdlib

import (
	"context"
	"time"

	"stashd/tg"
)

var _ tg.Client = (*Client)(nil)

// Client stands in for the TDLib adapter in a binary built without the
// libtdjson tag. New never returns one; its methods return tg.ErrNoTDLib.
type Client struct{}

// New returns tg.ErrNoTDLib: this binary was built without TDLib. Build
// with `make build-tdlib` (see mk/tdlib.mk) for the real adapter.
func New(context.Context, Config) (*Client, error) { return nil, tg.ErrNoTDLib }

// Version returns tg.ErrNoTDLib.
func Version() (string, error) { return "", tg.ErrNoTDLib }

// Updates implements tg.Client with a closed channel.
func (*Client) Updates() <-chan tg.Update {
	ch := make(chan tg.Update)
	close(ch)
	return ch
}

// LoadChats implements tg.Client.
func (*Client) LoadChats(context.Context) error { return tg.ErrNoTDLib }

// GetMe implements tg.Client.
func (*Client) GetMe(context.Context) (tg.User, error) { return tg.User{}, tg.ErrNoTDLib }

// GetChat implements tg.Client.
func (*Client) GetChat(context.Context, tg.ChatID) (tg.Chat, error) {
	return tg.Chat{}, tg.ErrNoTDLib
}

// OpenChat implements tg.Client.
// SearchPublicChat implements tg.Client.
func (*Client) SearchPublicChat(context.Context, string) (tg.Chat, error) {
	return tg.Chat{}, tg.ErrNoTDLib
}

func (*Client) OpenChat(context.Context, tg.ChatID) error { return tg.ErrNoTDLib }

// GetChatHistory implements tg.Client.
func (*Client) GetChatHistory(context.Context, tg.ChatID, tg.MessageID, int) ([]tg.Message, error) {
	return nil, tg.ErrNoTDLib
}

// SearchChatMessages implements tg.Client.
func (*Client) SearchChatMessages(context.Context, tg.Search) ([]tg.Message, error) {
	return nil, tg.ErrNoTDLib
}

// GetMessage implements tg.Client.
func (*Client) GetMessage(context.Context, tg.ChatID, tg.MessageID) (tg.Message, error) {
	return tg.Message{}, tg.ErrNoTDLib
}

// GetChatMessageByDate implements tg.Client.
func (*Client) GetChatMessageByDate(context.Context, tg.ChatID, time.Time) (tg.Message, error) {
	return tg.Message{}, tg.ErrNoTDLib
}

// GetForumTopic implements tg.Client.
func (*Client) GetForumTopic(context.Context, tg.ChatID, int64) (tg.Topic, error) {
	return tg.Topic{}, tg.ErrNoTDLib
}

// DownloadFile implements tg.Client.
func (*Client) DownloadFile(context.Context, int32) (tg.File, error) {
	return tg.File{}, tg.ErrNoTDLib
}

// CancelDownloadFile implements tg.Client.
func (*Client) CancelDownloadFile(context.Context, int32) error { return tg.ErrNoTDLib }

// DeleteFile implements tg.Client.
func (*Client) DeleteFile(context.Context, int32) error { return tg.ErrNoTDLib }

// SendDocument implements tg.Client.
func (*Client) SendDocument(context.Context, tg.ChatID, string, string) (tg.Message, error) {
	return tg.Message{}, tg.ErrNoTDLib
}

// SendDocumentTo implements tg.Client.
func (*Client) SendDocumentTo(context.Context, tg.ChatID, int64, string, string, tg.SendOptions) (tg.Message, error) {
	return tg.Message{}, tg.ErrNoTDLib
}

// SendDocumentAlbum implements tg.Client.
func (*Client) SendDocumentAlbum(context.Context, tg.ChatID, int64, []tg.AlbumItem, tg.SendOptions) ([]tg.Message, error) {
	return nil, tg.ErrNoTDLib
}

// CreateForumTopic implements tg.Client.
func (*Client) CreateForumTopic(context.Context, tg.ChatID, string) (int64, error) {
	return 0, tg.ErrNoTDLib
}

// SearchForumTopics implements tg.Client.
func (*Client) SearchForumTopics(context.Context, tg.ChatID, string, tg.TopicOffset, int) (tg.TopicPage, error) {
	return tg.TopicPage{}, tg.ErrNoTDLib
}

// ToggleForumTopicIsClosed implements tg.Client.
func (*Client) ToggleForumTopicIsClosed(context.Context, tg.ChatID, int64, bool) error {
	return tg.ErrNoTDLib
}

// DeleteMessages implements tg.Client.
func (*Client) DeleteMessages(context.Context, tg.ChatID, []tg.MessageID, bool) error {
	return tg.ErrNoTDLib
}

// Close implements tg.Client; there is nothing to close.
func (*Client) Close() error { return nil }

var _ tg.Directory = (*Client)(nil)

// GetChats implements tg.Directory.
func (*Client) GetChats(context.Context, bool, int) ([]tg.ChatID, error) { return nil, tg.ErrNoTDLib }

// GetSupergroup implements tg.Directory.
func (*Client) GetSupergroup(context.Context, tg.ChatID) (tg.Supergroup, error) {
	return tg.Supergroup{}, tg.ErrNoTDLib
}
