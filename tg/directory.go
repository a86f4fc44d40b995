package tg

import "context"

// Directory is what an account's client tells about the chats it knows,
// beyond Client: the chat lists and the account's standing in each
// channel or supergroup. `stashd chats` and `stashd doctor` use it; the
// daemon does not. Both adapters implement it.
type Directory interface {
	// GetChats returns the ids of the first limit chats of one chat list
	// (getChats with chatListMain, or chatListArchive when archive is
	// set), in the list's order.
	GetChats(ctx context.Context, archive bool, limit int) ([]ChatID, error)
	// GetSupergroup returns the supergroup behind a channel, supergroup or
	// forum chat (getSupergroup of the chat's supergroup_id), with the
	// account's membership and rights in it. It is answered locally; for
	// any other kind of chat it fails with 400.
	GetSupergroup(ctx context.Context, chat ChatID) (Supergroup, error)
}

// MethodGetChats and MethodGetSupergroup name Directory's requests.
const (
	MethodGetChats      = "getChats"
	MethodGetSupergroup = "getSupergroup"
)

// Membership is the account's chatMemberStatus in a chat, without the
// prefix.
type Membership string

// Memberships as TDLib names them.
const (
	MemberCreator       Membership = "creator"
	MemberAdministrator Membership = "administrator"
	MemberMember        Membership = "member"
	MemberRestricted    Membership = "restricted"
	MemberLeft          Membership = "left"
	MemberBanned        Membership = "banned"
)

// Supergroup is a channel, supergroup or forum as getSupergroup reports it,
// reduced to what stashd shows an operator.
type Supergroup struct {
	// Username is the first active public @username, without the @; ""
	// for a private chat.
	Username  string
	IsChannel bool
	IsForum   bool
	// Status is the account's membership.
	Status Membership
	// CanPost says whether the account may post documents: the creator
	// always, an administrator of a channel with can_post_messages, any
	// member of a supergroup whose permissions allow documents.
	CanPost bool
	// CanManageTopics is a forum's can_manage_topics: creating topics
	// (routes with topic = "same" need it).
	CanManageTopics bool
}

// IsMember reports whether the account is in the chat (a restricted
// member is).
func (s Supergroup) IsMember() bool {
	switch s.Status {
	case MemberCreator, MemberAdministrator, MemberMember, MemberRestricted:
		return true
	}
	return false
}

// IsAdmin reports whether the account administers the chat.
func (s Supergroup) IsAdmin() bool {
	return s.Status == MemberCreator || s.Status == MemberAdministrator
}
