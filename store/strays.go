package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// StraySend is a message of an account's send that the session which made
// or found it could not settle: a send that landed after the account's
// lease had moved on, whose record was refused (ErrStaleEpoch; the new
// owner may have sent the part again meanwhile), or a second copy whose
// deletion failed for a reason that may pass (the lease gate, a 500, a
// flood wait, a stop).
type StraySend struct {
	Destination tg.ChatID
	Message     tg.MessageID
	// Token is the delivery token its caption carries.
	Token string
	// Account is the account that sent it.
	Account string
	// Overdue: the note is older than StrayPatience.
	Overdue bool
}

// StrayPatience is how long a note whose settling keeps failing for a
// reason that may pass is tried again (StraySend.Overdue past it).
const StrayPatience = 24 * time.Hour

// NoteStraySends keeps strays for the account's owner to settle (see
// migration 025), or, while that account is away, a running account that
// sends to their destinations. The write is not fenced: it is what an instance whose
// fenced record was refused still may write.
func (s *Store) NoteStraySends(ctx context.Context, strays ...StraySend) error {
	b := &pgx.Batch{}
	for _, st := range strays {
		b.Queue(`INSERT INTO stray_sends (destination_chat_id, dest_message_id, token, account) VALUES ($1, $2, $3, $4)
			ON CONFLICT DO NOTHING`, int64(st.Destination), int64(st.Message), st.Token, st.Account)
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("note %d sends to settle: %w", len(strays), err)
	}
	return nil
}

// StraySends returns the strays of account's sends, oldest note first.
func (s *Store) StraySends(ctx context.Context, account string) ([]StraySend, error) {
	rows, err := s.pool.Query(ctx, `SELECT destination_chat_id, dest_message_id, token, account, noted_at < now() - $2::interval
		FROM stray_sends WHERE account = $1 ORDER BY noted_at, dest_message_id`, account, StrayPatience.String())
	if err != nil {
		return nil, fmt.Errorf("read the sends to settle of %s: %w", account, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StraySend, error) {
		var st StraySend
		var dest, msg int64
		err := r.Scan(&dest, &msg, &st.Token, &st.Account, &st.Overdue)
		st.Destination, st.Message = tg.ChatID(dest), tg.MessageID(msg)
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the sends to settle of %s: %w", account, err)
	}
	return out, nil
}

// ForgetStraySend deletes st's note once it is settled.
func (s *Store) ForgetStraySend(ctx context.Context, st StraySend) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM stray_sends WHERE destination_chat_id = $1 AND dest_message_id = $2`,
		int64(st.Destination), int64(st.Message)); err != nil {
		return fmt.Errorf("forget the settled send %d in %d: %w", st.Message.ServerID(), st.Destination, err)
	}
	return nil
}
