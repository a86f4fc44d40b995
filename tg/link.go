package tg

import (
	"fmt"
	"strconv"
)

// MessageLink returns the t.me link of a message of a channel or
// supergroup: https://t.me/c/ID/MSG, with /ID/TOPIC/MSG inside a forum
// topic. Such a link opens for members of the chat whatever its username,
// so it is the one stashd can always make from the ids it keeps. It returns
// "" for chats that are not channels or supergroups (ids not of the form
// -100xxxxxxxxxx) and for messages not on the server.
func MessageLink(chat ChatID, msg MessageID, topic int64) string {
	const channelBase = -1_000_000_000_000
	if chat >= channelBase || !msg.IsServer() {
		return ""
	}
	internal := strconv.FormatInt(channelBase-int64(chat), 10)
	if topic > 0 {
		return fmt.Sprintf("https://t.me/c/%s/%d/%d", internal, MessageID(topic).ServerID(), msg.ServerID())
	}
	return fmt.Sprintf("https://t.me/c/%s/%d", internal, msg.ServerID())
}

// PublicMessageLink is the link of a message for a reader of the
// destination: https://t.me/USERNAME/MSG (with the topic, /USERNAME/TOPIC/MSG)
// when the chat has a public username, MessageLink otherwise. It returns ""
// where neither exists.
func PublicMessageLink(username string, chat ChatID, msg MessageID, topic int64) string {
	if !msg.IsServer() {
		return ""
	}
	if username == "" {
		return MessageLink(chat, msg, topic)
	}
	if topic > 0 {
		return fmt.Sprintf("https://t.me/%s/%d/%d", username, MessageID(topic).ServerID(), msg.ServerID())
	}
	return fmt.Sprintf("https://t.me/%s/%d", username, msg.ServerID())
}
