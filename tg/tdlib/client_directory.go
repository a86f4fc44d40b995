//go:build libtdjson

package tdlib

import (
	"context"
	"fmt"

	"stashd/tg"
)

var _ tg.Directory = (*Client)(nil)

// GetChats implements tg.Directory.
func (c *Client) GetChats(ctx context.Context, archive bool, limit int) ([]tg.ChatID, error) {
	data, err := c.call(ctx, getChatsRequest(archive, limit))
	if err != nil {
		return nil, fmt.Errorf("get chats: %w", err)
	}
	return decodeChats(data)
}

// GetSupergroup implements tg.Directory: getChat (local) for the chat's
// default permissions, then getSupergroup.
func (c *Client) GetSupergroup(ctx context.Context, chat tg.ChatID) (tg.Supergroup, error) {
	id := supergroupOfChat(chat)
	if id == 0 {
		return tg.Supergroup{}, fmt.Errorf("get supergroup of chat %d: %w", chat, &tg.Error{Code: 400, Message: "Chat is not a supergroup or channel"})
	}
	data, err := c.call(ctx, getChatRequest(chat))
	if err != nil {
		return tg.Supergroup{}, fmt.Errorf("get chat %d: %w", chat, err)
	}
	perms, err := decodeChatPermissions(data)
	if err != nil {
		return tg.Supergroup{}, err
	}
	data, err = c.call(ctx, getSupergroupRequest(id))
	if err != nil {
		return tg.Supergroup{}, fmt.Errorf("get supergroup of chat %d: %w", chat, err)
	}
	return decodeSupergroup(data, perms)
}
