package tg

import "time"

// Update is one event from a client's update stream. The concrete types below
// are the only implementations.
type Update interface{ isUpdate() }

// NewMessage is updateNewMessage.
type NewMessage struct{ Message Message }

// ChatLastMessage is updateChatLastMessage. LastMessageID is 0 when the chat
// became empty.
type ChatLastMessage struct {
	Chat          ChatID
	LastMessageID MessageID
}

// ConnectionStateChanged is updateConnectionState.
type ConnectionStateChanged struct{ State ConnectionState }

// SendSucceeded is updateMessageSendSucceeded: the temporary message
// OldMessageID has become Message on the server.
type SendSucceeded struct {
	Message      Message
	OldMessageID MessageID
}

// SendFailed is updateMessageSendFailed.
type SendFailed struct {
	Chat         ChatID
	OldMessageID MessageID
	// MessageID is the failed message's new local id: TDLib keeps it in
	// the chat (sending state failed) until it is deleted. Zero when
	// unknown.
	MessageID MessageID
	Err       error
}

// MessagesDeleted is updateDeleteMessages. A pending send can end this way
// instead of succeeding or failing: its temporary id is then among IDs and
// the message will never exist.
type MessagesDeleted struct {
	Chat ChatID
	IDs  []MessageID
	// IsPermanent is false when the messages were only removed from TDLib's
	// cache (FromCache) rather than deleted.
	IsPermanent bool
	FromCache   bool
}

// FileUpdated is updateFile: download (or upload) progress of a file.
type FileUpdated struct{ File File }

// OptionChanged is updateOption. Value is the option's value rendered as text.
type OptionChanged struct {
	Name  string
	Value string
}

// ForumTopicInfo is updateForumTopicInfo: a topic was created or renamed.
type ForumTopicInfo struct{ Topic Topic }

// MessageContentChanged is updateMessageContent: an existing message was
// edited, possibly gaining a document. The new content is not part of the
// update in TDLib; callers fetch the message by id.
type MessageContentChanged struct {
	Chat    ChatID
	Message MessageID
}

// ChatAccessLost is updateSupergroup, or updateBasicGroup of a group
// still active, with the account's status left or banned (a member
// removed from a basic group is shown banned): the account can no longer
// read the chat, although getChat and openChat still answer from TDLib's
// local state.
type ChatAccessLost struct{ Chat ChatID }

// ChatAccessHeld is updateSupergroup or updateBasicGroup with the account
// a member of the chat (creator, administrator, member, or restricted
// while a member). TDLib sends each whenever the group changes and for
// each group it loads, so it says the account is a member now, not that
// it just joined: after a ChatAccessLost, access is back.
type ChatAccessHeld struct{ Chat ChatID }

// ChatUpgraded is updateBasicGroup with upgraded_to_supergroup_id set: the
// basic group From became the supergroup To, a new chat with its own
// message ids (its history starts with messageChatUpgradeFrom). From keeps
// its old messages and gets no new ones.
type ChatUpgraded struct{ From, To ChatID }

func (ChatUpgraded) isUpdate()           {}
func (ChatAccessLost) isUpdate()         {}
func (ChatAccessHeld) isUpdate()         {}
func (NewMessage) isUpdate()             {}
func (ChatLastMessage) isUpdate()        {}
func (ConnectionStateChanged) isUpdate() {}
func (SendSucceeded) isUpdate()          {}
func (SendFailed) isUpdate()             {}
func (MessagesDeleted) isUpdate()        {}
func (FileUpdated) isUpdate()            {}
func (OptionChanged) isUpdate()          {}
func (ForumTopicInfo) isUpdate()         {}
func (MessageContentChanged) isUpdate()  {}

// MessageEdited is updateMessageEdited: a message was edited (its text,
// caption or media) at EditDate. It comes with updateMessageContent when
// the content itself changed; stashd acts on the latter.
type MessageEdited struct {
	Chat     ChatID
	Message  MessageID
	EditDate time.Time
}

func (MessageEdited) isUpdate() {}
