package tgsim

import (
	"context"

	"stashd/tg"
)

// SendDocumentAlbum implements tg.Client: sendMessageAlbum of documents
// already on Telegram. It refuses what TDLib's send_message_group refuses,
// in its order: an unknown chat; an empty album (400 "There are no
// messages to send"); a chat the account cannot write to; any bad item,
// each checked as sendMessage checks its document (one refuses the
// request and nothing is sent); more than tg.MaxAlbum items (400 "Too many
// messages to send as an album"); then a bad forum topic. A single item is sent as an ordinary
// message (media_album_id 0). Otherwise the messages share a new
// media_album_id. The album is one request to the server (Telegram's
// messages.sendMultiMedia), so the chat's send limit judges it once, by
// the messages it posts, and the random outcomes (SendFailRate,
// SendFloodRate, SendVanishRate) are drawn once: a request that fails
// fails every message of it with the same error, as TDLib's
// SendMultiMediaQuery does. Each message then settles on its own, with its
// own SendSucceeded or SendFailed; the one way an album lands in part is
// TDLib's: a message the server's answer leaves out fails alone with 400
// "Message was not sent" (InjectSendFailures makes one). World.Calls
// counts one sendMessageAlbum; the send log has a record per message,
// carrying the album's id.
func (c *Client) SendDocumentAlbum(ctx context.Context, chat tg.ChatID, thread int64, items []tg.AlbumItem, opts tg.SendOptions) ([]tg.Message, error) {
	return call(ctx, c, tg.MethodSendMessageAlbum, func() ([]tg.Message, error) {
		return c.sendDocs(tg.MethodSendMessageAlbum, chat, thread, items, opts)
	})
}

// sendDocs makes the send of items (one message, or an album's) into
// thread of chat as one request: the request is checked in TDLib's order
// (see SendDocumentAlbum), every item before any is sent, the chat's send
// limit judges the request once by its messages, and the messages settle
// together. A request inside a flood wait that holds it is noted
// (floodwaits.go). w.mu is held.
func (c *Client) sendDocs(method string, chat tg.ChatID, thread int64, items []tg.AlbumItem, opts tg.SendOptions) ([]tg.Message, error) {
	dest, err := c.sendChat(chat)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, errBadRequest("There are no messages to send")
	}
	if c.w.accounts[c.account].readOnly[dest.id] {
		return nil, errBadRequest("%s", readOnlyRefusal(dest.kind))
	}
	files := make([]*file, len(items))
	for i, it := range items {
		if files[i], err = c.checkItem(it.RemoteFileID, it.Caption); err != nil {
			return nil, err
		}
	}
	if len(items) > tg.MaxAlbum {
		return nil, errBadRequest("Too many messages to send as an album")
	}
	if err := checkThread(dest, thread); err != nil {
		return nil, err
	}
	c.w.noteRequestInWait(c.w.accounts[c.account], method, dest.id, false)
	var limitErr error
	if dest.sendLimit != nil {
		// The server judges the chat's rate when the send reaches it.
		limitErr = dest.sendLimit.admitSend(c.account, c.w.cfg.Now(), len(items))
	}
	var album int64
	if len(items) > 1 {
		c.w.albumSeq++
		album = sentAlbumBase + c.w.albumSeq
	}
	out := make([]tg.Message, len(items))
	pss := make([]*pendingSend, len(items))
	outcome := c.w.drawOutcome(c.w.accounts[c.account])
	for i, it := range items {
		pss[i], out[i] = c.startSend(dest, thread, files[i], it.Caption, opts, album, outcome, limitErr)
	}
	c.settleLater(pss)
	return out, nil
}

// sentAlbumBase starts the media_album_ids of the albums clients send,
// apart from those of the albums the generator posts.
const sentAlbumBase = 14_000_000_000_000_000
