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
