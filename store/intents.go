package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// intentWrite is the statement that writes the intents of parts of pkg to
// dest (those not written yet) and reads every part's row back, with the
// copy of it found in the destination, into byPart once it has run.
type intentWrite struct {
	stmt   Statement
	byPart map[int]Intent
}

// newIntentWrite returns the intents' statement for account, fenced by
// ctx's fence. With guard, it writes nothing unless guard's attempt took
// its lock (the statement then runs after that attempt, in its unit).
//
// The statement's snapshot does not hold the rows its INSERT writes:
// those come from RETURNING, the others from the table.
func (s *Store) newIntentWrite(ctx context.Context, pkg int64, dest tg.ChatID, parts []int, account string, guard *LockAhead) *intentWrite {
	fa, fe := s.fenceArgs(ctx)
	idx := make([]int32, len(parts))
	tokens := make([]string, len(parts))
	for i, p := range parts {
		idx[i], tokens[i] = int32(p), newToken()
	}
	var lockName, lockOwner *string
	if guard != nil {
		lockName, lockOwner = &guard.name, &guard.owner
	}
	w := &intentWrite{byPart: make(map[int]Intent, len(parts))}
	w.stmt = Statement{SQL: `WITH ins AS (
			INSERT INTO deliveries (package_id, destination_chat_id, part_idx, token, account, fence_account, fence_epoch)
			SELECT $1, $2, u.p, u.t, $5, $6, $7 FROM unnest($3::int[], $4::text[]) AS u(p, t)
			WHERE $8::text IS NULL OR EXISTS (SELECT FROM package_locks l WHERE l.name = $8 AND l.owner = $9)
			ON CONFLICT (package_id, destination_chat_id, part_idx) DO NOTHING
			RETURNING package_id, destination_chat_id, part_idx, token, state, dest_message_id, account, created_at),
		rows AS (
			SELECT i.*, true AS fresh FROM ins i
			UNION ALL
			SELECT d.package_id, d.destination_chat_id, d.part_idx, d.token, d.state, d.dest_message_id, d.account, d.created_at, false
			FROM deliveries d
			WHERE d.package_id = $1 AND d.destination_chat_id = $2 AND d.part_idx = ANY($3::int[])
				AND NOT EXISTS (SELECT FROM ins WHERE ins.part_idx = d.part_idx))
		SELECT r.package_id, r.destination_chat_id, r.part_idx, r.token, r.state, r.dest_message_id, r.account, r.created_at,
			r.fresh, c.dest_message_id
		FROM rows r LEFT JOIN LATERAL (
			SELECT c.dest_message_id FROM destination_copies c JOIN remote_files f ON f.unique_id = c.unique_id
			WHERE r.state <> 'sent' AND c.destination_chat_id = $2 AND f.package_id = $1 AND f.idx = r.part_idx
			ORDER BY c.dest_message_id LIMIT 1) c ON true`,
		Args: []any{pkg, int64(dest), idx, tokens, account, fa, fe, lockName, lockOwner},
		Read: func(rows pgx.Rows) error {
			for rows.Next() {
				var in Intent
				var d, copyMsg *int64
				var state string
				var destChat int64
				if err := rows.Scan(&in.PackageID, &destChat, &in.PartIndex, &in.Token, &state, &d, &in.Account, &in.CreatedAt, &in.Fresh, &copyMsg); err != nil {
					return err
				}
				in.Destination, in.State = tg.ChatID(destChat), DeliveryState(state)
				if d != nil {
					in.DestMessageID = tg.MessageID(*d)
				}
				if copyMsg != nil {
					in.Copy = tg.MessageID(*copyMsg)
				}
				w.byPart[in.PartIndex] = in
			}
			return rows.Err()
		}}
	return w
}

// IntentsAhead are the intents of a delivery written ahead of its send
// turn, in the unit that takes its lock ahead (LockAhead.WithIntents): the
// delivery stage writes the next delivery's intents in the round trip
// that records the last one. They are written only if that unit takes the
// lock; Intents gives them once LockAhead.Take returned it.
//
// An intent written ahead that no send used must be dropped
// (Lock.DropIntents) when the delivery ends without sending (a closed window, a flood wait, a
// stop): kept, it would make the next attempt search the destination for
// a token no message carries.
type IntentsAhead struct {
	w     *intentWrite
	parts []int
	// mu guards the rows read, which the committer writes.
	mu sync.Mutex
}

// WithIntents adds to the attempt the intents of parts of pkg to dest for
// account (fenced by ctx's fence), written only if the attempt takes the
// lock. Call it before Statements.
func (a *LockAhead) WithIntents(ctx context.Context, pkg int64, dest tg.ChatID, parts []int, account string) *IntentsAhead {
	ia := &IntentsAhead{w: a.s.newIntentWrite(ctx, pkg, dest, parts, account, a), parts: parts}
	read := ia.w.stmt.Read
	ia.w.stmt.Read = func(rows pgx.Rows) error {
		ia.mu.Lock()
		defer ia.mu.Unlock()
		return read(rows)
	}
	a.reads = append(a.reads, ia.w.stmt)
	return ia
}

// Intents returns the rows of the parts the statement read, in order: use
// it only once LockAhead.Take returned the lock. A part written meanwhile
// by another transaction (not in the statement's snapshot) is missing: its
// row is read when the send writes its intents (EnsureIntents).
func (ia *IntentsAhead) Intents() []Intent {
	ia.mu.Lock()
	defer ia.mu.Unlock()
	var out []Intent
	for _, p := range ia.parts {
		if in, ok := ia.w.byPart[p]; ok {
			out = append(out, in)
		}
	}
	return out
}

// DropIntents deletes the intents holding tokens, written under this lock
// and sent with none, while they are still intents and the lock is still
// this holder's (lockStillHeld): after a takeover (the lock lost) the new
// holder may be sending them, and the record of that send needs their
// rows.
func (l *Lock) DropIntents(tokens []string) Statement {
	return Statement{SQL: `DELETE FROM deliveries WHERE token = ANY($1) AND state = 'intent' AND ` + lockStillHeld(2),
		Args: []any{tokens, l.name, l.owner}}
}

// lockStillHeld is the condition of a write made under a lock only while
// the lock is still its holder's, the lock's name and owner being the
// statement's parameters $n and $n+1. The lock's row is read FOR SHARE: a
// takeover committed after the statement's snapshot is seen as it is now,
// and one in flight waits for the write's commit.
func lockStillHeld(n int) string {
	return fmt.Sprintf(`EXISTS (SELECT FROM package_locks WHERE name = $%d AND owner = $%d FOR SHARE)`, n, n+1)
}

// DropUnsent commits DropIntents(tokens) on its own: the intents of a
// send Telegram refused (no message carries their tokens) go, so the next
// attempt writes fresh ones and reads nothing in the destination. Under a
// lock lost meanwhile they stay: the holder that took it over may be
// sending them.
func (l *Lock) DropUnsent(ctx context.Context, tokens ...string) error {
	if err := l.s.Commit(ctx, l.DropIntents(tokens)); err != nil {
		return fmt.Errorf("drop the intents of a refused send: %w", err)
	}
	return nil
}
