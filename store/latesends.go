package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// lateSendEnded selects the late_sends rows whose watch has ended
// (along the index by until), leaving out those another transaction has
// locked: every start of an account and every take deletes them in
// passing, and one that waited on another's rows could deadlock with it;
// a row locked elsewhere is being deleted or renewed there.
const lateSendEnded = `token IN (SELECT token FROM late_sends WHERE until <= now() FOR UPDATE SKIP LOCKED)`

// LateSendsWatched returns the intents account took over (TakeWaiting)
// whose tokens it still watches, each with the time left of its watch by
// the database's clock, so that a new run of the account (a restart, or
// another instance holding its lease) watches them as the run that took
// them did. Rows whose watch has ended, of any account, are deleted.
func (s *Store) LateSendsWatched(ctx context.Context, account string) ([]TakenIntent, error) {
	rows, err := s.pool.Query(ctx, `WITH ended AS (DELETE FROM late_sends WHERE `+lateSendEnded+`)
		SELECT token, destination_chat_id, sender, (extract(epoch FROM until - now()) * 1e6)::bigint
		FROM late_sends WHERE account = $1 AND until > now()`, account)
	if err != nil {
		return nil, fmt.Errorf("read the late sends %s watches: %w", account, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TakenIntent, error) {
		var in TakenIntent
		var dest, left int64
		err := r.Scan(&in.Token, &dest, &in.Account, &left)
		in.Destination, in.Left = tg.ChatID(dest), time.Duration(left)*time.Microsecond
		return in, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the late sends %s watches: %w", account, err)
	}
	return out, nil
}
