package main

import (
	"fmt"

	"stashd/store"
)

// printSourceEvents prints what happened to a source's messages after they
// were read: documents replaced by edits (each replacement mirrored on its
// own), messages deleted before their package could be fetched (recorded,
// never retried), and a public chat read without membership.
func printSourceEvents(s store.SourceStatus) {
	if s.Access == store.AccessNotMember {
		fmt.Printf("source %d: public chat the account has not joined: kept open, so TDLib sends its updates; catch-up and rescan read it as usual\n", s.ChatID)
	}
	if s.ReplacedDocuments > 0 {
		fmt.Printf("source %d: %d documents replaced by edits; each replacement was taken as a new document\n", s.ChatID, s.ReplacedDocuments)
	}
	if s.DeletedAtSource > 0 {
		fmt.Printf("source %d: %d messages deleted at source before their package was fetched (recorded, not retried; see stashd deadletters)\n",
			s.ChatID, s.DeletedAtSource)
	}
}

// printRenamed warns about a configured @username that no longer names
// the chat it first resolved to.
func printRenamed(n store.ChatName) {
	now := "no chat"
	if n.CurrentChatID != 0 {
		now = fmt.Sprintf("chat %d", n.CurrentChatID)
	}
	fmt.Printf("account %s: @%s no longer names source %d (it now names %s); the source is still followed by its id: update the configuration\n",
		n.Account, n.Username, n.ChatID, now)
}
