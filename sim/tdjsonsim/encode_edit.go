package tdjsonsim

import "stashd/tg"

// messageEditedObject is updateMessageEdited. The simulator's edits
// replace media and caption; it keeps no reply markup, and TDLib leaves a
// null member out.
func messageEditedObject(u tg.MessageEdited) object {
	return object{
		{"@type", "updateMessageEdited"},
		{"chat_id", int64(u.Chat)},
		{"message_id", int64(u.Message)},
		{"edit_date", u.EditDate.Unix()},
	}
}
