package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// DeadLetterState is where a dead letter stands.
type DeadLetterState string

// Dead-letter states.
const (
	DeadPending   DeadLetterState = "pending"
	DeadExhausted DeadLetterState = "exhausted"
	DeadResolved  DeadLetterState = "resolved"
	// DeadDeleted: the source message was deleted (or its document
	// replaced) before its package was fetched. Terminal: never retried,
	// and nothing an operator can do brings the file back.
	DeadDeleted DeadLetterState = "deleted"
)

// ClassNoAccess is the error class of a dead letter its account could not
// fetch because it cannot read the source any more (removed from the chat,
// or the chat unknown to it): exhausted, since no retry of that account
// reads it while it cannot, and the source is recorded inaccessible. It is
// due again once the source's account reads the chat again (a scan
// without error of the source recorded inaccessible: FinishScan), or once
// another account takes the source over (TakeSource), for that account's
// retry loop.
const ClassNoAccess = "no_access"

// DeadLetter is a source message whose handling failed. It does not hold the
// watermark back: the retry loop fetches it again by id.
type DeadLetter struct {
	Key           tg.MessageKey
	Account       string
	ErrorClass    string
	Reason        string
	Attempts      int
	NextAttemptAt time.Time // zero: never retried automatically
	// Waiting marks a letter that waits for an event rather than a timer
	// (an incomplete set's part waits for the missing part, which brings
	// the set back when it comes): pending, with no next attempt.
	Waiting bool
	// Deleted records the letter as deleted at source (DeadDeleted).
	Deleted   bool
	State     DeadLetterState
	UpdatedAt time.Time
}

// RecordDeadLetter records a failure of key, counting attempts. next is when
// the retry loop may try again; a zero next marks the letter exhausted. The
// source message is recorded with outcome dead_letter in the same
// transaction, so the message counts as handled. The letter goes to the
// account of key's source, whose retry loop fetches it: one another
// account recorded as ClassNoAccess is due at once. One of the source's
// own account exhausted as ClassNoAccess records the source inaccessible,
// with the letter's reason unless it was already: the scan that reads the
// chat again makes the letter due (FinishScan), also when no scan saw the
// loss (the account was back before one ran, or the daemon stopped).
func (s *Store) RecordDeadLetter(ctx context.Context, d DeadLetter, msg SourceMessage) error {
	state := DeadPending
	var next *time.Time
	switch {
	case d.Deleted:
		state = DeadDeleted
	case d.Waiting:
	case d.NextAttemptAt.IsZero():
		state = DeadExhausted
	default:
		next = &d.NextAttemptAt
	}
	msg.Key, msg.Outcome = d.Key, OutcomeDeadLetter
	name, raw := storableName(msg.FileName)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The message may carry another document by now (an edit replaced
		// it) whose own handling recorded it: a failure of the old
		// document is then no dead letter of the message.
		//
		// The letter is the source's account's to retry, whichever
		// account's handling failed (one the source was taken from may
		// still drain its queue); a failure for want of access of another
		// account is no reason for the source's own not to read it. The
		// source is read FOR SHARE, in the same round trip: a TakeSource
		// of it waits for this commit and then moves the letter too, or
		// this read waits for the move and finds the new account. (A
		// ClaimSources meanwhile skips the source, as any row being
		// written, and claims it at its next pass.) A letter for want of
		// access may write the source's row below: it takes the row for
		// that at once, since two such letters each holding it FOR SHARE
		// would deadlock there.
		lock := "FOR SHARE"
		if d.ErrorClass == ClassNoAccess {
			lock = "FOR NO KEY UPDATE"
		}
		var cur, owner *string
		err := tx.QueryRow(ctx, `SELECT
				(SELECT unique_id FROM source_messages WHERE chat_id = $1 AND message_id = $2 FOR UPDATE),
				(SELECT account FROM sources WHERE chat_id = $1 `+lock+`)`,
			int64(d.Key.Chat), int64(d.Key.Message)).Scan(&cur, &owner)
		if err != nil {
			return err
		}
		if cur != nil && *cur != "" && msg.UniqueID != "" && *cur != msg.UniqueID {
			return nil
		}
		if owner != nil && *owner != d.Account {
			if d.ErrorClass == ClassNoAccess && state == DeadExhausted {
				now := time.Now()
				state, next = DeadPending, &now
			}
			d.Account = *owner
		}
		if owner != nil && d.ErrorClass == ClassNoAccess && state == DeadExhausted {
			_, err = tx.Exec(ctx, `UPDATE sources SET access = 'inaccessible',
					access_reason = CASE WHEN access = 'inaccessible' THEN access_reason ELSE $2 END,
					access_since = coalesce(access_since, now()), updated_at = now()
				WHERE chat_id = $1`, int64(d.Key.Chat), text(d.Reason))
			if err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO dead_letters (chat_id, message_id, account, error_class, reason,
				attempts, next_attempt_at, state)
			VALUES ($1, $2, $3, $4, $5, 1, $6, $7)
			ON CONFLICT (chat_id, message_id) DO UPDATE SET account = EXCLUDED.account,
				error_class = EXCLUDED.error_class, reason = EXCLUDED.reason,
				attempts = dead_letters.attempts + 1, next_attempt_at = EXCLUDED.next_attempt_at,
				state = EXCLUDED.state, updated_at = now()`,
			int64(d.Key.Chat), int64(d.Key.Message), d.Account, d.ErrorClass, text(d.Reason), next, string(state))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO source_messages (chat_id, message_id, topic_id, album_id, file_name,
				file_size, unique_id, outcome, set_key, part_index, file_name_raw, file_name_cleaned, edit_date)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 'dead_letter', $8, $9, $10, $11, $12)
			ON CONFLICT (chat_id, message_id) DO UPDATE SET outcome = 'dead_letter', handled_at = now()
			WHERE source_messages.outcome IN ('part_pending', 'dead_letter')`,
			int64(d.Key.Chat), int64(d.Key.Message), msg.TopicID, msg.AlbumID, name, msg.FileSize,
			text(msg.UniqueID), text(msg.SetKey), msg.PartIndex, raw, raw != "", timeOrNull(msg.EditDate))
		return err
	})
	if err != nil {
		return fmt.Errorf("record dead letter %s: %w", d.Key, err)
	}
	return nil
}

// ParkDeadLetter takes a pending letter off the retry timer: its message
// is back in a set waiting for its parts, whose outcome settles the letter
// (resolved with the package, or recorded again as a dead letter).
func (s *Store) ParkDeadLetter(ctx context.Context, key tg.MessageKey) error {
	_, err := s.pool.Exec(ctx, `UPDATE dead_letters SET next_attempt_at = NULL, updated_at = now()
		WHERE chat_id = $1 AND message_id = $2 AND state = 'pending'`, int64(key.Chat), int64(key.Message))
	if err != nil {
		return fmt.Errorf("park dead letter %s: %w", key, err)
	}
	return nil
}

// ResolveDeadLetter marks a dead letter resolved after a successful retry.
func (s *Store) ResolveDeadLetter(ctx context.Context, key tg.MessageKey) error {
	_, err := s.pool.Exec(ctx, `UPDATE dead_letters SET state = 'resolved', next_attempt_at = NULL, updated_at = now()
		WHERE chat_id = $1 AND message_id = $2 AND state <> 'resolved'`, int64(key.Chat), int64(key.Message))
	if err != nil {
		return fmt.Errorf("resolve dead letter %s: %w", key, err)
	}
	return nil
}

const deadLetterColumns = `chat_id, message_id, account, error_class, reason, attempts, next_attempt_at, state, updated_at`

func scanDeadLetter(r pgx.CollectableRow) (DeadLetter, error) {
	var d DeadLetter
	var c, m int64
	var next *time.Time
	var st string
	err := r.Scan(&c, &m, &d.Account, &d.ErrorClass, &d.Reason, &d.Attempts, &next, &st, &d.UpdatedAt)
	d.Key = tg.MessageKey{Chat: tg.ChatID(c), Message: tg.MessageID(m)}
	d.State = DeadLetterState(st)
	if next != nil {
		d.NextAttemptAt = *next
	}
	return d, err
}

// DeadLetters lists dead letters in a state ("" = pending and exhausted).
func (s *Store) DeadLetters(ctx context.Context, state DeadLetterState, limit int) ([]DeadLetter, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters
		WHERE ($1 = '' AND state <> 'resolved') OR state = $1 ORDER BY created_at LIMIT $2`, string(state), limit)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// DueDeadLetters returns pending dead letters of account whose next attempt
// time has passed.
func (s *Store) DueDeadLetters(ctx context.Context, account string, now time.Time, limit int) ([]DeadLetter, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters
		WHERE state = 'pending' AND account = $1 AND next_attempt_at <= $2 ORDER BY next_attempt_at LIMIT $3`,
		account, now, limit)
	if err != nil {
		return nil, fmt.Errorf("list due dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("list due dead letters: %w", err)
	}
	return out, nil
}

// DeadLetterCounts counts dead letters by state.
func (s *Store) DeadLetterCounts(ctx context.Context) (map[DeadLetterState]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM dead_letters GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	out := map[DeadLetterState]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("count dead letters: %w", err)
		}
		out[DeadLetterState(st)] = n
	}
	return out, rows.Err()
}

// ScheduleDeadLetters makes dead letters due now: one by key, or all
// exhausted and pending ones when key is nil (operator's retry command).
// Letters deleted at source are left out of "all": their message is gone.
func (s *Store) ScheduleDeadLetters(ctx context.Context, key *tg.MessageKey) (int, error) {
	var tag interface{ RowsAffected() int64 }
	var err error
	if key != nil {
		tag, err = s.pool.Exec(ctx, `UPDATE dead_letters SET state = 'pending', next_attempt_at = now(), updated_at = now()
			WHERE chat_id = $1 AND message_id = $2 AND state <> 'resolved'`, int64(key.Chat), int64(key.Message))
	} else {
		tag, err = s.pool.Exec(ctx, `UPDATE dead_letters SET state = 'pending', next_attempt_at = now(), updated_at = now()
			WHERE state NOT IN ('resolved', 'deleted')`)
	}
	if err != nil {
		return 0, fmt.Errorf("schedule dead letters: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// DeadLetterAttempts returns how many times key has failed as a dead letter
// (0 when it never has).
func (s *Store) DeadLetterAttempts(ctx context.Context, key tg.MessageKey) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT attempts FROM dead_letters WHERE chat_id = $1 AND message_id = $2), 0)`,
		int64(key.Chat), int64(key.Message)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read dead letter %s: %w", key, err)
	}
	return n, nil
}

// ReviveSet puts the parts of a set that are dead letters because the set
// was incomplete or failed (error classes incomplete_set and set_failed,
// pending or exhausted) back among the set's pending parts: a late part has
// come, or one part's letter is retried, and the set is judged whole or not
// with every part it has. Exhausted letters come back too: left out, a
// retried part would look like a set of its own (a lone x.zip, one album
// document) and be delivered. The letters stay unresolved until the set
// completes and resolves them. It returns how many parts came back.
func (s *Store) ReviveSet(ctx context.Context, chat tg.ChatID, topic int64, setKey string) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE source_messages m SET outcome = 'part_pending', handled_at = now()
		FROM dead_letters d
		WHERE m.chat_id = $1 AND m.topic_id = $2 AND m.set_key = $3 AND m.outcome = 'dead_letter'
			AND d.chat_id = m.chat_id AND d.message_id = m.message_id AND d.state <> 'resolved'
			AND d.error_class IN ('incomplete_set', 'set_failed')`, int64(chat), topic, text(setKey))
	if err != nil {
		return 0, fmt.Errorf("revive set %q: %w", setKey, err)
	}
	return int(tag.RowsAffected()), nil
}
