package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// Source is a watched chat and its scan state.
type Source struct {
	ChatID      tg.ChatID
	Account     string
	Kind        tg.ChatKind
	Title       string
	Watermark   int64 // server id
	Dirty       bool
	DirtyReason string
	LastSeen    int64 // server id
	LastScanAt  time.Time
	NextScanAt  time.Time
	EmptyScans  int
	Failures    int
	// CircuitUntil is when a failing source may be tried again; zero when closed.
	CircuitUntil time.Time
	LastError    string
	// Access is AccessOK, or AccessLost once server calls about the source
	// fail with "Can't access the chat"; AccessReason is that error.
	Access       string
	AccessReason string
	// Protected: the source protects its content (has_protected_content);
	// its documents cannot be re-sent.
	Protected bool
	// UpgradedTo is the supergroup this basic group was upgraded to, a
	// source of its own; 0 when it never was.
	UpgradedTo tg.ChatID
	// Era is this process's era when the row was read (Sources,
	// GetSource, ClaimSources, FollowUpgrade): a state learnt from it is
	// written under it (WithEra), and refused once it ended.
	Era Era
}

// Source access states.
const (
	AccessOK   = "ok"
	AccessLost = "inaccessible"
	// AccessNotMember: a public chat the account reads without having
	// joined it. TDLib sends its updates only while the chat is open, so
	// the daemon keeps it open; its catch-up and rescan read it as any
	// other source.
	AccessNotMember = "not_member"
)

// UpsertAccount records an account and its Premium flag.
func (s *Store) UpsertAccount(ctx context.Context, name string, userID int64, premium bool) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO accounts (name, user_id, is_premium) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET user_id = EXCLUDED.user_id, is_premium = EXCLUDED.is_premium, updated_at = now()`,
		name, userID, premium)
	if err != nil {
		return fmt.Errorf("upsert account %s: %w", name, err)
	}
	return nil
}

// EnsureSource registers a source, starting at src.Watermark, or updates a
// known one's kind and title without touching its watermark or its
// account: a chat two accounts list stays with the one recorded first
// (TakeSource moves it).
func (s *Store) EnsureSource(ctx context.Context, src Source) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO accounts (name) VALUES ($1) ON CONFLICT DO NOTHING`, src.Account); err != nil {
		return fmt.Errorf("ensure account %s: %w", src.Account, err)
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO sources (chat_id, account, kind, title, watermark) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (chat_id) DO UPDATE SET kind = EXCLUDED.kind,
			title = EXCLUDED.title, updated_at = now()`,
		int64(src.ChatID), src.Account, string(src.Kind), src.Title, src.Watermark)
	if err != nil {
		return fmt.Errorf("ensure source %d: %w", src.ChatID, err)
	}
	return nil
}

// TakeSource moves chat from account from to account to, and reports
// whether it did (false when chat is not from's any more: another
// instance moved it first). The watermark and the scan history stay; what
// described from's reading of the chat goes: its access, last error and
// circuit, so the new account's catch-up scans it at once. The chat's
// dead letters not resolved go with it, in the same transaction: only the
// source's account retries them (DueDeadLetters), and the rescan passes
// over their messages as handled. Those exhausted because their account
// could not read the chat (ClassNoAccess) are due again at once. Under a
// fence (WithFence) it is refused once to's lease moved on.
func (s *Store) TakeSource(ctx context.Context, chat tg.ChatID, from, to string) (bool, error) {
	fa, fe := s.fenceArgs(ctx)
	moved := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// A claim held is the old account's catch-up's (a scan under way on
		// another instance, or one that stopped mid-scan): it must not keep
		// the new account off the source until it expires.
		tag, err := tx.Exec(ctx, `UPDATE sources SET account = $3, access = 'ok', access_reason = '',
				access_since = NULL, failures = 0, last_error = '', circuit_until = NULL, next_scan_at = now(),
				claim_owner = NULL, claim_until = NULL,
				updated_at = now(), fence_account = $4, fence_epoch = $5
			WHERE chat_id = $1 AND account = $2`, int64(chat), from, to, fa, fe)
		if err != nil || tag.RowsAffected() != 1 {
			return err
		}
		moved = true
		// A statement of its own, after the source's row is ours: its
		// snapshot sees a letter whose RecordDeadLetter held the row
		// (FOR SHARE) and committed while the move waited for it, which
		// one statement's snapshot, taken before that wait, would miss.
		_, err = tx.Exec(ctx, `UPDATE dead_letters SET account = $2, updated_at = now(),
				state = CASE WHEN state = 'exhausted' AND error_class = $3 THEN 'pending' ELSE state END,
				next_attempt_at = CASE WHEN state = 'exhausted' AND error_class = $3 THEN now() ELSE next_attempt_at END
			WHERE chat_id = $1 AND account <> $2 AND state <> 'resolved'`, int64(chat), to, ClassNoAccess)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("move source %d from %s to %s: %w", chat, from, to, fenced(ctx, err))
	}
	return moved, nil
}

const sourceColumns = `chat_id, account, kind, title, watermark, dirty, dirty_reason, last_seen,
	last_scan_at, next_scan_at, empty_scans, failures, circuit_until, last_error,
	access, access_reason, protected, upgraded_to`

func scanSource(row pgx.Row) (Source, error) {
	var src Source
	var chat int64
	var kind string
	var lastScan, circuit *time.Time
	var upgraded int64
	err := row.Scan(&chat, &src.Account, &kind, &src.Title, &src.Watermark, &src.Dirty, &src.DirtyReason,
		&src.LastSeen, &lastScan, &src.NextScanAt, &src.EmptyScans, &src.Failures, &circuit, &src.LastError,
		&src.Access, &src.AccessReason, &src.Protected, &upgraded)
	if err != nil {
		return Source{}, err
	}
	src.ChatID, src.Kind, src.UpgradedTo = tg.ChatID(chat), tg.ChatKind(kind), tg.ChatID(upgraded)
	if lastScan != nil {
		src.LastScanAt = *lastScan
	}
	if circuit != nil {
		src.CircuitUntil = *circuit
	}
	return src, nil
}

// GetSource returns one source, or ErrNotFound.
func (s *Store) GetSource(ctx context.Context, chat tg.ChatID) (Source, error) {
	era := s.Era()
	src, err := scanSource(s.pool.QueryRow(ctx, `SELECT `+sourceColumns+` FROM sources WHERE chat_id = $1`, int64(chat)))
	if errors.Is(err, pgx.ErrNoRows) {
		return Source{}, fmt.Errorf("source %d: %w", chat, ErrNotFound)
	}
	if err != nil {
		return Source{}, fmt.Errorf("get source %d: %w", chat, err)
	}
	src.Era = era
	return src, nil
}

// Sources returns the sources of account ("" = all), ordered by chat id.
func (s *Store) Sources(ctx context.Context, account string) ([]Source, error) {
	era := s.Era()
	rows, err := s.pool.Query(ctx, `SELECT `+sourceColumns+` FROM sources
		WHERE $1 = '' OR account = $1 ORDER BY chat_id`, account)
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Source, error) { return scanSource(r) })
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	for i := range out {
		out[i].Era = era
	}
	return out, nil
}

// MarkAccountDirty marks every source of account dirty: at start-up nothing
// is trusted until a catch-up has looked.
func (s *Store) MarkAccountDirty(ctx context.Context, account, reason string) error {
	_, err := s.pool.Exec(ctx, `UPDATE sources SET dirty = true, dirty_reason = $2,
		dirty_since = CASE WHEN dirty THEN dirty_since ELSE now() END, updated_at = now()
		WHERE account = $1`, account, reason)
	if err != nil {
		return fmt.Errorf("mark sources of %s dirty: %w", account, err)
	}
	return nil
}

// AdvanceWatermark raises chat's watermark to w (never lowers it) and its
// last seen id with it. Under a fence (WithFence) it is refused with
// ErrStaleEpoch once the account's lease moved on. A catalogue that may
// have rewound and is not checked yet keeps its watermark, and one learnt
// in an era that ended is refused (see SaveSourceState).
func (s *Store) AdvanceWatermark(ctx context.Context, chat tg.ChatID, w int64) error {
	fa, fe := s.fenceArgs(ctx)
	err := s.writeSourceState(ctx, `UPDATE sources SET watermark = GREATEST(watermark, $2),
		last_seen = GREATEST(last_seen, $2), updated_at = now(), fence_account = $3, fence_epoch = $4
		WHERE chat_id = $1 AND `+catalogueCurrent(5), int64(chat), w, fa, fe)
	if err != nil {
		return fmt.Errorf("advance watermark of %d: %w", chat, err)
	}
	return nil
}

// writeSourceState runs sql, a write of a source's state whose last
// argument, after args, is the table OID catalogueCurrent compares. It is
// refused while the change of server this process saw is unchecked, or
// when ctx's era ended (serverWatch.sourceWrite), asked once the write's
// connection is in hand.
func (s *Store) writeSourceState(ctx context.Context, sql string, args ...any) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	oid, err := s.server.sourceWrite(ctx)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, sql, append(args, oid)...)
	return fenced(ctx, err)
}

// UpsertTopic stores a forum topic's name.
func (s *Store) UpsertTopic(ctx context.Context, t tg.Topic) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO topics (chat_id, thread_id, name) VALUES ($1, $2, $3)
		ON CONFLICT (chat_id, thread_id) DO UPDATE SET name = EXCLUDED.name, updated_at = now()`,
		int64(t.ChatID), t.ThreadID, t.Name)
	if err != nil {
		return fmt.Errorf("upsert topic %d/%d: %w", t.ChatID, t.ThreadID, err)
	}
	return nil
}

// SaveSourceState writes the listener's view of a source: dirty (with its
// reason) or synced up to watermark, and the newest id seen. Watermark and
// last seen never move back. Under a fence (WithFence) it is refused once
// the account's lease moved on.
//
// A catalogue that may have rewound and is not checked yet keeps the
// source's state: a process that ran on before the rewind holds
// watermarks past the messages the catalogue forgot, which the rewind's
// reload of the sources (after CheckIdentity names it) must find as the
// rewound catalogue has them, or those messages are never read again. A
// change of server this process saw is refused with ErrRewindUnchecked (the
// listener keeps the write pending); a dump restored in place, which only
// the catalogue tells, leaves the row as restored until this process's own
// check names it, also when another instance's check recorded the
// restored tables first. A state learnt in an era that ended since (ctx's,
// WithEra) is refused with ErrRewound: written after the check, it would
// carry the rewound catalogue's watermark past what it forgot.
func (s *Store) SaveSourceState(ctx context.Context, chat tg.ChatID, dirty bool, reason string, watermark, lastSeen int64) error {
	fa, fe := s.fenceArgs(ctx)
	err := s.writeSourceState(ctx, `UPDATE sources SET
			dirty = $2,
			dirty_reason = CASE WHEN $2 THEN $3 ELSE '' END,
			dirty_since = CASE WHEN NOT $2 THEN NULL WHEN dirty THEN dirty_since ELSE now() END,
			watermark = CASE WHEN $2 THEN watermark ELSE GREATEST(watermark, $4) END,
			last_seen = GREATEST(last_seen, $5, CASE WHEN $2 THEN 0 ELSE $4 END),
			updated_at = now(), fence_account = $6, fence_epoch = $7
		WHERE chat_id = $1 AND `+catalogueCurrent(8), int64(chat), dirty, reason, watermark, lastSeen, fa, fe)
	if err != nil {
		return fmt.Errorf("save state of source %d: %w", chat, err)
	}
	return nil
}

// Upgrades returns, by recorded source, the supergroup each basic group
// was upgraded to, whichever account reads it: every account listing the
// group lists the supergroup too.
func (s *Store) Upgrades(ctx context.Context) (map[tg.ChatID]tg.ChatID, error) {
	rows, err := s.pool.Query(ctx, `SELECT chat_id, upgraded_to FROM sources WHERE upgraded_to <> 0`)
	if err != nil {
		return nil, fmt.Errorf("list source upgrades: %w", err)
	}
	out := map[tg.ChatID]tg.ChatID{}
	var from, to int64
	_, err = pgx.ForEachRow(rows, []any{&from, &to}, func() error {
		out[tg.ChatID(from)] = tg.ChatID(to)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list source upgrades: %w", err)
	}
	return out, nil
}

// FollowUpgrade records that the basic group from was upgraded to the
// supergroup to and makes to a source of from's account: a new source
// starts dirty at watermark 0 (its history starts at the upgrade, so
// catch-up reads it from the start); a chat already watched keeps its
// state. from keeps its watermark and catalogue history. It returns the
// new chat's source.
func (s *Store) FollowUpgrade(ctx context.Context, from, to tg.ChatID, reason string) (Source, error) {
	var src Source
	era := s.Era()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var account, title string
		err := tx.QueryRow(ctx, `UPDATE sources SET upgraded_to = $2, updated_at = now() WHERE chat_id = $1
			RETURNING account, title`, int64(from), int64(to)).Scan(&account, &title)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("source %d: %w", from, ErrNotFound)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO sources (chat_id, account, kind, title, dirty, dirty_reason, dirty_since)
			VALUES ($1, $2, $3, $4, true, $5, now()) ON CONFLICT (chat_id) DO NOTHING`,
			int64(to), account, string(tg.KindSupergroup), title, reason)
		if err != nil {
			return err
		}
		src, err = scanSource(tx.QueryRow(ctx, `SELECT `+sourceColumns+` FROM sources WHERE chat_id = $1`, int64(to)))
		return err
	})
	if err != nil {
		return Source{}, fmt.Errorf("follow upgrade of %d to %d: %w", from, to, err)
	}
	src.Era = era
	return src, nil
}
