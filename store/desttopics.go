package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// TopicName returns the stored name of a source forum topic; false when
// the store does not know it.
func (s *Store) TopicName(ctx context.Context, chat tg.ChatID, thread int64) (string, bool, error) {
	var name string
	err := s.pool.QueryRow(ctx, `SELECT name FROM topics WHERE chat_id = $1 AND thread_id = $2`,
		int64(chat), thread).Scan(&name)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("look up topic %d/%d: %w", chat, thread, err)
	}
	return name, true, nil
}

// DestinationTopic returns what the store holds of the topic named name
// in destination forum dest: found is false when nothing is recorded;
// thread is 0 when a creation was begun (BeginDestinationTopic) but its
// topic never recorded.
func (s *Store) DestinationTopic(ctx context.Context, dest tg.ChatID, name string) (thread int64, found bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT thread_id FROM destination_topics WHERE destination_chat_id = $1 AND name = $2`,
		int64(dest), name).Scan(&thread)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("look up topic %q of destination %d: %w", name, dest, err)
	}
	return thread, true, nil
}

// BeginDestinationTopic records that account is about to create the topic
// named name in dest (thread 0), unless a row exists already.
func (s *Store) BeginDestinationTopic(ctx context.Context, dest tg.ChatID, name, account string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO destination_topics (destination_chat_id, name, created_by)
		VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, int64(dest), name, account)
	if err != nil {
		return fmt.Errorf("begin topic %q of destination %d: %w", name, dest, err)
	}
	return nil
}

// SetDestinationTopic records thread as the topic named name in dest,
// unless a topic is recorded already; it returns the recorded thread (the
// first one recorded wins).
func (s *Store) SetDestinationTopic(ctx context.Context, dest tg.ChatID, name string, thread int64, account string) (int64, error) {
	var got int64
	err := s.pool.QueryRow(ctx, `INSERT INTO destination_topics AS t (destination_chat_id, name, thread_id, created_by)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (destination_chat_id, name) DO UPDATE SET thread_id = EXCLUDED.thread_id, created_by = EXCLUDED.created_by
			WHERE t.thread_id = 0
		RETURNING thread_id`, int64(dest), name, thread, account).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) { // recorded already: keep it
		got, _, err = s.DestinationTopic(ctx, dest, name)
	}
	if err != nil {
		return 0, fmt.Errorf("record topic %q of destination %d: %w", name, dest, err)
	}
	return got, nil
}

// DestinationTopicLock names the lock that serialises the creation of the
// topic named name in dest across workers, accounts and instances (see
// Lock).
func DestinationTopicLock(dest tg.ChatID, name string) string {
	return fmt.Sprintf("dtopic:%d:%s", dest, name)
}

// ForgetDestinationTopic drops the record of the topic named name in dest
// while it is thread: the topic was deleted, and the next delivery creates
// it again. A record another creator has replaced meanwhile is kept.
func (s *Store) ForgetDestinationTopic(ctx context.Context, dest tg.ChatID, name string, thread int64) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM destination_topics WHERE destination_chat_id = $1 AND name = $2 AND thread_id = $3`,
		int64(dest), name, thread)
	if err != nil {
		return fmt.Errorf("forget topic %q of destination %d: %w", name, dest, err)
	}
	return nil
}
