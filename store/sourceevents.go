package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// MessageDocument is MessageHandled (dedup layer 1) with the document the
// message was handled with. A message edited since (editMessageMedia
// keeps the message id) carries another document now: see
// ReplaceDocument.
func (s *Store) MessageDocument(ctx context.Context, key tg.MessageKey) (Document, error) {
	var d Document
	if err := s.look(ctx, LookMessageDocument(key, &d)); err != nil {
		return Document{}, fmt.Errorf("look up message %s: %w", key, err)
	}
	return d, nil
}

// ReplaceDocument retires the record of key made for the document oldID
// once an edit replaced it with newID: the record moves to
// replaced_documents and a dead letter about the old document is
// resolved, so the message is unhandled and its new document goes through
// the ingest path. It does nothing when the record is not oldID's (already
// replaced).
func (s *Store) ReplaceDocument(ctx context.Context, key tg.MessageKey, oldID, newID string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `WITH gone AS (
				DELETE FROM source_messages WHERE chat_id = $1 AND message_id = $2 AND unique_id = $3
				RETURNING chat_id, message_id, unique_id, outcome, package_id)
			INSERT INTO replaced_documents (chat_id, message_id, old_unique_id, new_unique_id, old_outcome, old_package_id)
			SELECT chat_id, message_id, unique_id, $4, outcome, package_id FROM gone
			ON CONFLICT (chat_id, message_id, old_unique_id) DO NOTHING`,
			int64(key.Chat), int64(key.Message), oldID, newID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE dead_letters SET state = 'resolved', next_attempt_at = NULL,
				reason = 'document replaced by an edit', updated_at = now()
			WHERE chat_id = $1 AND message_id = $2 AND state <> 'resolved'`, int64(key.Chat), int64(key.Message))
		return err
	})
	if err != nil {
		return fmt.Errorf("record replaced document of %s: %w", key, err)
	}
	return nil
}

// ReplacedDocuments counts the source documents replaced by edits, of
// every source.
func (s *Store) ReplacedDocuments(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM replaced_documents`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count replaced documents: %w", err)
	}
	return n, nil
}

// ChatName is a configured @username and the chat it resolved to the
// first time; RenamedAt is set once the name stopped leading there.
type ChatName struct {
	Account   string     `json:"account"`
	Username  string     `json:"username"`
	ChatID    tg.ChatID  `json:"chat_id"`
	RenamedAt *time.Time `json:"renamed_at,omitempty"`
	// CurrentChatID is what the name resolves to now; 0 for nothing.
	CurrentChatID tg.ChatID `json:"current_chat_id,omitempty"`
}

// ResolvedName returns the chat id username (lower case, no @) resolved
// to for account the first time, if it ever did.
func (s *Store) ResolvedName(ctx context.Context, account, username string) (tg.ChatID, bool, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT chat_id FROM source_names WHERE account = $1 AND username = $2`,
		account, username).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read resolved name @%s: %w", username, err)
	}
	return tg.ChatID(id), true, nil
}

// RecordName records what username resolves to now. The first resolution
// is kept: a name that later leads elsewhere (current differs from the
// stored chat, or current is 0 for nothing) is marked renamed, and one
// that leads back to its chat is cleared. It returns the name's record.
func (s *Store) RecordName(ctx context.Context, account, username string, current tg.ChatID) (ChatName, error) {
	var n ChatName
	var id int64
	var cur *int64
	err := s.pool.QueryRow(ctx, `INSERT INTO source_names (account, username, chat_id) VALUES ($1, $2, $3)
		ON CONFLICT (account, username) DO UPDATE SET
			renamed_at = CASE WHEN source_names.chat_id = $3 THEN NULL
				ELSE coalesce(source_names.renamed_at, now()) END,
			current_chat_id = CASE WHEN source_names.chat_id = $3 THEN NULL ELSE nullif($3, 0) END
		RETURNING account, username, chat_id, renamed_at, current_chat_id`,
		account, username, int64(current)).Scan(&n.Account, &n.Username, &id, &n.RenamedAt, &cur)
	if err != nil {
		return n, fmt.Errorf("record name @%s: %w", username, err)
	}
	n.ChatID = tg.ChatID(id)
	if cur != nil {
		n.CurrentChatID = tg.ChatID(*cur)
	}
	return n, nil
}

// RenamedNames lists the configured names that no longer lead to the
// chat they first resolved to.
func (s *Store) RenamedNames(ctx context.Context) ([]ChatName, error) {
	rows, err := s.pool.Query(ctx, `SELECT account, username, chat_id, renamed_at, coalesce(current_chat_id, 0)
		FROM source_names WHERE renamed_at IS NOT NULL ORDER BY account, username`)
	if err != nil {
		return nil, fmt.Errorf("list renamed names: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ChatName, error) {
		var n ChatName
		var id, cur int64
		err := r.Scan(&n.Account, &n.Username, &id, &n.RenamedAt, &cur)
		n.ChatID, n.CurrentChatID = tg.ChatID(id), tg.ChatID(cur)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("list renamed names: %w", err)
	}
	return out, nil
}

// sourceEventStatus adds to st what happened to sources after they were
// read: documents replaced by edits, messages deleted before their
// package was fetched, and renamed @usernames.
func (s *Store) sourceEventStatus(ctx context.Context, st *Status) error {
	rows, err := s.pool.Query(ctx, `SELECT chat_id, sum(replaced), sum(deleted) FROM (
			SELECT chat_id, 1 AS replaced, 0 AS deleted FROM replaced_documents
			UNION ALL SELECT chat_id, 0, 1 FROM dead_letters WHERE state = 'deleted') e
		GROUP BY chat_id`)
	if err != nil {
		return fmt.Errorf("read source events: %w", err)
	}
	type counts struct{ replaced, deleted int }
	by := map[int64]counts{}
	for rows.Next() {
		var chat int64
		var c counts
		if err := rows.Scan(&chat, &c.replaced, &c.deleted); err != nil {
			rows.Close()
			return fmt.Errorf("read source events: %w", err)
		}
		by[chat] = c
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read source events: %w", err)
	}
	for i := range st.Sources {
		c := by[st.Sources[i].ChatID]
		st.Sources[i].ReplacedDocuments, st.Sources[i].DeletedAtSource = c.replaced, c.deleted
	}
	st.RenamedNames, err = s.RenamedNames(ctx)
	return err
}
