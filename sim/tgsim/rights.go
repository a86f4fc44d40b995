package tgsim

import "stashd/tg"

// Posting rights are judged twice, as in TDLib: by the session's TDLib
// from the rights it knows, before a send is made, and by the server when
// the send reaches it.

// SetWriteAccess gives account write access to chat or takes it away (a
// member that may read but not post, as after its rights in a channel were
// revoked): its sends there fail as TDLib refuses them from the rights it
// knows (readOnlyRefusal).
func (w *World) SetWriteAccess(account string, chat tg.ChatID, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	a.readOnly[chat], a.serverReadOnly[chat] = !ok, !ok
}

// SetServerWriteAccess changes account's write access to chat on the
// server alone, as when the update that would tell its sessions (an
// updateChatMember for the revoked rights) was lost in a gap: TDLib still
// holds the rights it knew, so a send passes its own check, and the
// server refuses it when it arrives (updateMessageSendFailed with the
// server's serverWriteRefusal). SetWriteAccess tells the sessions.
func (w *World) SetServerWriteAccess(account string, chat tg.ChatID, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mustAccount(account).serverReadOnly[chat] = !ok
}

// serverWriteRefusal is the server's refusal of a document sent into a
// chat of kind by a member without the right, as TDLib passes it on: the
// server answers 403, which TDLib's process_send_message_fail_error turns
// into 400, keeping the message (CHAT_WRITE_FORBIDDEN in a channel,
// CHAT_SEND_DOCS_FORBIDDEN in a group restricted from documents).
func serverWriteRefusal(kind tg.ChatKind) error {
	if kind == tg.KindChannel {
		return errBadRequest("CHAT_WRITE_FORBIDDEN")
	}
	return errBadRequest("CHAT_SEND_DOCS_FORBIDDEN")
}

// writeRefusal is the server's judgement of account's right to post in
// dest when a send reaches it, whatever its TDLib believed; w.mu is held.
func (w *World) writeRefusal(account string, dest *chat) error {
	if w.accounts[account].serverReadOnly[dest.id] {
		return serverWriteRefusal(dest.kind)
	}
	return nil
}

// readOnlyRefusal is TDLib's 400 to a document sent by a member without
// write access into a chat of kind: a channel's plain member may not post
// at all (can_send_message_to_dialog), a supergroup's or forum's member
// restricted from documents may not send one (can_send_message_content).
// TDLib's "Have no write access to the chat" is for a chat the account is
// no member of.
func readOnlyRefusal(kind tg.ChatKind) string {
	if kind == tg.KindChannel {
		return "Need administrator rights in the channel chat"
	}
	return "Not enough rights to send documents to the chat"
}
