package store

import (
	"context"
	"fmt"

	"stashd/tg"
)

// FlagZeroWidth marks an entry whose name holds a zero-width character.
const FlagZeroWidth = "zero-width"

// Verification is what checking a package's archive to its end found.
type Verification struct {
	// Verified is true when the archive listed to its end without error.
	Verified bool
	// Broken says why verification failed, for a package mirrored anyway
	// (deliver_broken); "" otherwise.
	Broken string
	// NameLied is true when the bytes are another format than the name says.
	NameLied bool
	// Suspicious lists what the structure lies about.
	Suspicious []string
}

// GetVerification reads the verification recorded for pkg.
func (s *Store) GetVerification(ctx context.Context, pkg int64) (Verification, error) {
	var v Verification
	err := s.pool.QueryRow(ctx, `SELECT verified, broken, name_lied, suspicious FROM packages WHERE id = $1`, pkg).
		Scan(&v.Verified, &v.Broken, &v.NameLied, &v.Suspicious)
	if err != nil {
		return v, fmt.Errorf("read verification of package %d: %w", pkg, err)
	}
	return v, nil
}

// NameFlags returns the flags recorded for the posted file name of the
// message key (control, bidi, zero-width), nil when none or unknown.
func (s *Store) NameFlags(ctx context.Context, key tg.MessageKey) ([]string, error) {
	var flags []string
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT name_flags FROM source_messages
		WHERE chat_id = $1 AND message_id = $2), '{}')`, key.Chat, key.Message).Scan(&flags)
	if err != nil {
		return nil, fmt.Errorf("read name flags of %v: %w", key, err)
	}
	if len(flags) == 0 {
		return nil, nil
	}
	return flags, nil
}

// RecordRejected records a copy of a part left out of its set, and why;
// pkg is the package the set became, 0 when none.
func (s *Store) RecordRejected(ctx context.Context, key tg.MessageKey, pkg int64, fileName, reason string) error {
	var p any
	if pkg != 0 {
		p = pkg
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO rejected_parts (chat_id, message_id, package_id, file_name, reason)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (chat_id, message_id) DO UPDATE SET package_id = EXCLUDED.package_id, reason = EXCLUDED.reason`,
		key.Chat, key.Message, p, text(fileName), text(reason))
	if err != nil {
		return fmt.Errorf("record rejected part %v: %w", key, err)
	}
	return nil
}
