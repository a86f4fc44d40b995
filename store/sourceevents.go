package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// MessageHandledAs is MessageHandled (dedup layer 1) for a message that
// carries the document with unique id uniqueID. A message already
// recorded with another document had its document replaced by an edit
// (editMessageMedia keeps the message id): its record moves to
// replaced_documents, a dead letter about the old document is resolved,
// and the message reports as not handled, so the new document goes
// through the ingest path. replaced tells that this happened.
func (s *Store) MessageHandledAs(ctx context.Context, key tg.MessageKey, uniqueID string) (out Outcome, handled, replaced bool, err error) {
	var o, old string
	err = s.pool.QueryRow(ctx, `SELECT outcome, unique_id FROM source_messages WHERE chat_id = $1 AND message_id = $2`,
		int64(key.Chat), int64(key.Message)).Scan(&o, &old)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, false, nil
	}
	if err != nil {
		return "", false, false, fmt.Errorf("look up message %s: %w", key, err)
	}
	if uniqueID == "" || old == "" || old == uniqueID {
		return Outcome(o), true, false, nil
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `WITH gone AS (
				DELETE FROM source_messages WHERE chat_id = $1 AND message_id = $2 AND unique_id = $3
				RETURNING chat_id, message_id, unique_id, outcome, package_id)
			INSERT INTO replaced_documents (chat_id, message_id, old_unique_id, new_unique_id, old_outcome, old_package_id)
			SELECT chat_id, message_id, unique_id, $4, outcome, package_id FROM gone
			ON CONFLICT (chat_id, message_id, old_unique_id) DO NOTHING`,
			int64(key.Chat), int64(key.Message), old, uniqueID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE dead_letters SET state = 'resolved', next_attempt_at = NULL,
				reason = 'document replaced by an edit', updated_at = now()
			WHERE chat_id = $1 AND message_id = $2 AND state <> 'resolved'`, int64(key.Chat), int64(key.Message))
		return err
	})
	if err != nil {
		return "", false, false, fmt.Errorf("record replaced document of %s: %w", key, err)
	}
	return "", false, true, nil
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
