package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// PendingEdit is a note of a source message whose content an edit changed
// and whose re-fetch is not handled yet (see migration 027). Seq orders the
// notes of one message.
type PendingEdit struct {
	Key tg.MessageKey
	Seq int64
}

func editArrays(edits []PendingEdit) (chats, msgs, seqs []int64) {
	for _, e := range edits {
		chats = append(chats, int64(e.Key.Chat))
		msgs = append(msgs, int64(e.Key.Message))
		seqs = append(seqs, e.Seq)
	}
	return chats, msgs, seqs
}

// NoteEdits keeps edits of account's sources until ForgetEdits; a message
// noted again keeps its highest seq.
func (s *Store) NoteEdits(ctx context.Context, account string, edits []PendingEdit) error {
	if len(edits) == 0 {
		return nil
	}
	chats, msgs, seqs := editArrays(edits)
	_, err := s.pool.Exec(ctx, `INSERT INTO pending_edits (chat_id, message_id, account, seq)
		SELECT c, m, $4, q FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS e(c, m, q)
		ON CONFLICT (chat_id, message_id) DO UPDATE SET account = EXCLUDED.account,
			seq = GREATEST(pending_edits.seq, EXCLUDED.seq), noted_at = now()`, chats, msgs, seqs, account)
	if err != nil {
		return fmt.Errorf("note %d edits: %w", len(edits), err)
	}
	return nil
}

// ForgetEdits drops the notes of edits whose re-fetch was handled: each
// message's note up to the seq given, not one noted later.
func (s *Store) ForgetEdits(ctx context.Context, edits []PendingEdit) error {
	if len(edits) == 0 {
		return nil
	}
	chats, msgs, seqs := editArrays(edits)
	_, err := s.pool.Exec(ctx, `DELETE FROM pending_edits p
		USING unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS e(c, m, q)
		WHERE p.chat_id = e.c AND p.message_id = e.m AND p.seq <= e.q`, chats, msgs, seqs)
	if err != nil {
		return fmt.Errorf("forget %d edits: %w", len(edits), err)
	}
	return nil
}

// PendingEdits returns at most limit noted edits of messages of chats,
// oldest first, whichever account noted them: a source another account
// read before (a shared source taken over) keeps its notes, and the notes
// of chats the caller no longer reads do not fill its page.
func (s *Store) PendingEdits(ctx context.Context, chats []tg.ChatID, limit int) ([]PendingEdit, error) {
	ids := chatIDs(chats)
	rows, err := s.pool.Query(ctx, `SELECT chat_id, message_id, seq FROM pending_edits
		WHERE chat_id = ANY($1) ORDER BY seq LIMIT $2`, ids, limit)
	if err != nil {
		return nil, fmt.Errorf("read the noted edits of %d chats: %w", len(chats), err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingEdit, error) {
		var c, m int64
		var e PendingEdit
		err := r.Scan(&c, &m, &e.Seq)
		e.Key = tg.MessageKey{Chat: tg.ChatID(c), Message: tg.MessageID(m)}
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the noted edits of %d chats: %w", len(chats), err)
	}
	return out, nil
}
